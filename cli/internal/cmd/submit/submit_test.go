package submit

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

// parse runs the command's flag parsing and returns the request it would send.
func parse(t *testing.T, args ...string) (*kilnv1.CreateTrainJobRequest, error) {
	t.Helper()
	io, _, _, _ := iostreams.Test()
	var req *kilnv1.CreateTrainJobRequest
	cmd := NewCmdSubmit(&factory.Factory{IO: io}, func(_ context.Context, o *Options) error {
		o.RequestID = "fixed"
		var err error
		req, err = o.request()
		return err
	})
	cmd.SetArgs(args)
	cmd.SetOut(io.Out)
	cmd.SetErr(io.ErrOut)
	return req, cmd.Execute()
}

func TestSubmitFlags(t *testing.T) {
	got, err := parse(t, "--runtime", "torch-distributed", "--image", "img", "--nodes", "2", "--gpus-per-node", "8", "--cpu", "4",
		"--memory", "64Gi", "--queue", "default", "--deadline", "8h", "--ttl", "1d", "--suspend", "--env", "LR=0.1", "--env", "A=b=c",
		"--label", "team=nlp", "--name", "mnist", "--dataset", "hf://d", "--priority-class", "high", "--", "torchrun", "train.py", "--epochs", "3")
	if err != nil {
		t.Fatal(err)
	}
	want := &kilnv1.CreateTrainJobRequest{RequestId: "fixed", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: &kilnv1.NewTrainJob{
		Name: "mnist", Labels: map[string]string{"team": "nlp"},
		Spec: &kilnv1.TrainJobSpec{
			Runtime: "torch-distributed", Image: "img", Nodes: 2, Command: []string{"torchrun", "train.py", "--epochs", "3"},
			Env:              []*kilnv1.EnvVar{{Name: "LR", Value: "0.1"}, {Name: "A", Value: "b=c"}},
			ResourcesPerNode: &kilnv1.Resources{Requests: map[string]string{"cpu": "4", "memory": "64Gi"}, Limits: map[string]string{"nvidia.com/gpu": "8", "memory": "64Gi"}},
			Queue:            "default", PriorityClass: "high", Suspend: true, DatasetUri: "hf://d",
			ActiveDeadlineSeconds: i64(8 * 3600), TtlSecondsAfterFinished: i32(86400),
		},
	}}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	got, err = parse(t, "--runtime", "jax-distributed")
	if err != nil || got.GetTrainJob().GetGenerateName() != "jax-distributed-" {
		t.Errorf("a job without name is generated from its runtime's: %v, %v", got, err)
	}
}

func TestSubmitUsageErrors(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: j}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no runtime":             {[]string{"--image", "x"}, "name a runtime with --runtime"},
		"command before --":      {[]string{"--runtime", "r", "torchrun"}, "put the command to run after --"},
		"bad deadline":           {[]string{"--runtime", "r", "--deadline", "soon"}, `--deadline "soon": want whole seconds`},
		"zero deadline":          {[]string{"--runtime", "r", "--deadline", "0s"}, "at least 1"},
		"fraction of a second":   {[]string{"--runtime", "r", "--ttl", "1.5s"}, "whole seconds"},
		"bad env":                {[]string{"--runtime", "r", "--env", "NOVALUE"}, `--env "NOVALUE": want NAME=VALUE`},
		"name and generate-name": {[]string{"--runtime", "r", "--name", "a", "--generate-name", "b-"}, "set one"},
		"manifest and fields":    {[]string{"-f", manifest, "--image", "x"}, "--image cannot be combined with -f"},
		"unknown flag":           {[]string{"--gpus", "8"}, "unknown flag: --gpus"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestSubmitManifestOverrides(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: from-file\nspec:\n  runtimeRef: {name: torch-distributed}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := parse(t, "-f", manifest, "--name", "renamed", "--deadline", "5s", "--queue", "q")
	if err != nil {
		t.Fatal(err)
	}
	m := got.GetManifest()
	for _, want := range []string{"name: renamed", "activeDeadlineSeconds: 5", "kueue.x-k8s.io/queue-name: q", "runtimeRef:"} {
		if !strings.Contains(m, want) {
			t.Errorf("manifest lacks %q:\n%s", want, m)
		}
	}
	unchanged, err := parse(t, "-f", manifest)
	if err != nil || !strings.Contains(unchanged.GetManifest(), "name: from-file") {
		t.Errorf("a manifest without overrides is sent as written: %v", err)
	}
}

func TestSubmit(t *testing.T) {
	s := kilntest.Start(t)
	f, io := s.Factory(false)
	o := &Options{Factory: f, Runtime: "torch-distributed", Name: "mnist", Command: []string{"python", "train.py"}}
	if err := run(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	if got := io.Out.(interface{ String() string }).String(); got != "trainjob team/mnist created\n" {
		t.Errorf("output %q", got)
	}
	if ns := s.Created[0].GetNamespace(); ns != "team" {
		t.Errorf("created in %q, want the context's namespace team", ns)
	}
	if s.Created[0].GetRequestId() == "" {
		t.Errorf("a submit carries a request id, so retries are safe")
	}

	f, io = s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f, Runtime: "torch-distributed", Name: "dry", DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if got := io.Out.(interface{ String() string }).String(); !strings.HasPrefix(got, "apiVersion: trainer.kubeflow.org/v1alpha1") || s.Job("team", "dry") != nil {
		t.Errorf("--dry-run printed %q and stored the job: %v", got, s.Job("team", "dry") != nil)
	}
}

func TestSubmitWaitExitCodes(t *testing.T) {
	for name, tc := range map[string]struct {
		final    kilnv1.State
		timeout  time.Duration
		wantCode int
	}{
		"complete":  {final: kilnv1.State_STATE_COMPLETE, wantCode: factory.ExitOK},
		"failed":    {final: kilnv1.State_STATE_FAILED, wantCode: factory.ExitFailed},
		"timed out": {timeout: 300 * time.Millisecond, wantCode: factory.ExitTimeout},
	} {
		t.Run(name, func(t *testing.T) {
			s := kilntest.Start(t)
			f, io := s.Factory(false)
			if tc.final != kilnv1.State_STATE_UNSPECIFIED {
				go func() {
					for s.Job("team", "w") == nil {
						time.Sleep(10 * time.Millisecond)
					}
					time.Sleep(100 * time.Millisecond)
					j := kilntest.Job("team", "w", tc.final)
					j.Status.Reason, j.Status.Message = "DeadlineExceeded", "TrainJob exceeded its active deadline"
					s.Put(j)
				}()
			}
			err := run(t.Context(), &Options{Factory: f, Runtime: "torch-distributed", Name: "w", Wait: true, Timeout: orDefault(tc.timeout, 10*time.Second)})
			if got := factory.ExitCode(err); got != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d; stderr %q", got, err, tc.wantCode, io.ErrOut.(interface{ String() string }).String())
			}
			if tc.final == kilnv1.State_STATE_FAILED && !strings.Contains(io.ErrOut.(interface{ String() string }).String(), "w Failed (DeadlineExceeded): TrainJob exceeded its active deadline") {
				t.Errorf("a failure names its reason: %q", io.ErrOut.(interface{ String() string }).String())
			}
		})
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"90": 90 * time.Second, "45m": 45 * time.Minute, "2d": 48 * time.Hour, "1d12h": 36 * time.Hour, "8h": 8 * time.Hour} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func i64(v int64) *int64 { return &v }
func i32(v int32) *int32 { return &v }
