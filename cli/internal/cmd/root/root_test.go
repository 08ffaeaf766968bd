package root

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

// kiln runs the whole command tree against s, as a pipe.
func kiln(t *testing.T, s *kilntest.Server, args ...string) (string, string, error) {
	t.Helper()
	f, io := s.Factory(false)
	cmd := NewCmdRoot(f, "kiln")
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return io.Out.(*bytes.Buffer).String(), io.ErrOut.(*bytes.Buffer).String(), err
}

func TestCommands(t *testing.T) {
	s := kilntest.Start(t)
	s.Put(kilntest.Job("team", "mnist", kilnv1.State_STATE_RUNNING))
	s.Runtimes = []*kilnv1.Runtime{{Name: "torch-distributed", Framework: "torch", Nodes: 1, Image: "pytorch/pytorch:2.7.1",
		DevicesPerNode: []*kilnv1.Device{{Resource: "nvidia.com/gpu", Count: 8}}, RunPolicy: &kilnv1.RunPolicy{}, Steps: []string{"node"}}}
	s.Queues = []*kilnv1.Queue{{Name: "default", Namespace: "team", ClusterQueue: "cluster-queue", Pending: 2, Admitted: 1, Active: true,
		Quota: []*kilnv1.FlavorQuota{{Flavor: "gpu", Resource: "nvidia.com/gpu", Used: "8", Nominal: "32"}}}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"suspend", "mnist"}, "trainjob team/mnist suspended\n"},
		{[]string{"resume", "mnist"}, "trainjob team/mnist resumed\n"},
		{[]string{"runtimes", "list"}, "torch-distributed\tClusterTrainingRuntime\ttorch\t1\tnvidia.com/gpu=8\t-\t-\t-\n"},
		{[]string{"runtimes", "get", "torch-distributed"}, "Name:           torch-distributed\nKind:           ClusterTrainingRuntime\nFramework:      torch\nImage:          pytorch/pytorch:2.7.1\nNodes:          1\nDevices/node:   nvidia.com/gpu=8\nSteps:          node\nDeadline:       -\nTTL:            -\n"},
		{[]string{"queues", "list"}, "default\tcluster-queue\t2\t1\tgpu/nvidia.com/gpu 8/32\n"},
		{[]string{"version"}, "Client:     dev\nServer:     v0.9.0 (" + s.URL + ")\nKubernetes: v1.36.3\nKueue:      installed\nYou are:    system:serviceaccount:team:alice\n"},
		{[]string{"version", "--client", "-o", "json"}, "{\n  \"client\": \"dev\"\n}\n"},
		{[]string{"delete", "mnist"}, "trainjob team/mnist deleted\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, _, err := kiln(t, s, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.want {
				t.Errorf("output:\n%q\nwant:\n%q", out, tc.want)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	s := kilntest.Start(t)
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantMsg  string
	}{
		{[]string{"get"}, factory.ExitUsage, "accepts 1 arg(s), received 0: usage: kiln get NAME"},
		{[]string{"list", "--nope"}, factory.ExitUsage, "unknown flag: --nope (see `kiln list --help`)"},
		{[]string{"wait", "mnist", "--for", "Done"}, factory.ExitUsage, `--for: unknown state "Done"`},
		{[]string{"completion", "tcsh"}, factory.ExitUsage, `invalid argument "tcsh"`},
		{[]string{"get", "missing"}, factory.ExitError, `getting TrainJob team/missing: trainjobs.trainer.kubeflow.org "missing" not found`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := kiln(t, s, tc.args...)
			if got := factory.ExitCode(err); got != tc.wantCode {
				t.Errorf("exit code %d, want %d (%v)", got, tc.wantCode, err)
			}
			if err == nil || !strings.Contains(factory.Message(err, s.URL), tc.wantMsg) {
				t.Errorf("message %q, want one saying %q", factory.Message(err, s.URL), tc.wantMsg)
			}
		})
	}
}

func TestUnreachableServer(t *testing.T) {
	test, _ := kilntest.Start(t).Factory(false)
	f := factory.New(test.IO)
	f.ConfigPath = filepath.Join(t.TempDir(), "none.yaml")
	cmd := NewCmdRoot(f, "kiln")
	cmd.SetArgs([]string{"list", "--server", "http://127.0.0.1:1"})
	err := cmd.ExecuteContext(t.Context())
	if msg := factory.Message(err, f.Server); !strings.HasPrefix(msg, "cannot reach the Kiln API server at http://127.0.0.1:1") {
		t.Errorf("message %q", msg)
	}
	t.Setenv("KILN_SERVER", "")
	cmd = NewCmdRoot(f, "kiln")
	cmd.SetArgs([]string{"list"})
	if err := cmd.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), "no Kiln API server configured") {
		t.Errorf("no configuration: %v", err)
	}
}

func TestPluginName(t *testing.T) {
	f, io := kilntest.Start(t).Factory(false)
	cmd := NewCmdRoot(f, "kubectl-kiln")
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if out := io.Out.(*bytes.Buffer).String(); !strings.Contains(out, "kubectl kiln [command]") {
		t.Errorf("help of the plugin does not say `kubectl kiln`:\n%s", out)
	}
}

// A word in backquotes in a flag's help becomes the flag's argument name in every help
// text (pflag's UnquoteUsage: "--runtime kiln runtimes list"): no flag of any command may
// have one, so each argument is named by its type.
func TestFlagHelpNamesNoArgumentByAccident(t *testing.T) {
	f, _ := kilntest.Start(t).Factory(false)
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		cmd.Flags().VisitAll(func(fl *pflag.Flag) {
			if strings.Contains(fl.Usage, "`") {
				name, _ := pflag.UnquoteUsage(fl)
				t.Errorf("%s --%s: its help %q names its argument %q: write the command without backquotes", cmd.CommandPath(), fl.Name, fl.Usage, name)
			}
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(NewCmdRoot(f, "kiln"))
}

// kiln submit --help as a user reads it: every flag's argument named by its type.
func TestSubmitHelp(t *testing.T) {
	out, _, err := kiln(t, kilntest.Start(t), "submit", "--help")
	if err != nil {
		t.Fatal(err)
	}
	kilntest.Golden(t, "submit-help", out)
}
