package list

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestNewCmdList(t *testing.T) {
	cases := map[string]struct {
		args    []string
		want    Options
		wantErr bool
	}{
		"defaults":       {args: nil, want: Options{}},
		"all namespaces": {args: []string{"-A"}, want: Options{AllNamespaces: true}},
		"selector":       {args: []string{"-l", "team=nlp"}, want: Options{Selector: "team=nlp"}},
		"states":         {args: []string{"--state", "Running,Queued"}, want: Options{States: []string{"Running", "Queued"}}},
		"output":         {args: []string{"-o", "wide"}, want: Options{Output: "wide"}},
		"no arguments":   {args: []string{"mnist"}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			io, _, _, _ := iostreams.Test()
			var got *Options
			cmd := NewCmdList(&factory.Factory{IO: io}, func(_ context.Context, o *Options) error { got = o; return nil })
			cmd.SetArgs(tc.args)
			cmd.SetOut(io.Out)
			cmd.SetErr(io.ErrOut)
			err := cmd.Execute()
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got, cmpopts.IgnoreFields(Options{}, "Factory")); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func fixture(t *testing.T) *kilntest.Server {
	s := kilntest.Start(t)
	// Its trainer reports percent, ETA and loss; bert's its last report; elsewhere's only
	// its steps; the queued job nothing yet. mnist runs on a worker cluster (MultiKueue).
	mnist := kilntest.Reporting(kilntest.Job("team", "mnist", kilnv1.State_STATE_RUNNING), 42, 310, "0.5321098741")
	mnist.Status.Cluster = "kiln-worker-1"
	s.Put(mnist)
	q := kilntest.Job("team", "llama-finetune-with-a-rather-long-name", kilnv1.State_STATE_QUEUED)
	q.Spec.Nodes = 16
	s.Put(q)
	done := kilntest.Reporting(kilntest.Job("team", "bert", kilnv1.State_STATE_COMPLETE), 100, 0, "0.2")
	done.Spec.Queue, done.Spec.Nodes = "", 0
	s.Put(done)
	failed := kilntest.Job("other", "elsewhere", kilnv1.State_STATE_FAILED)
	step := int64(1200)
	failed.Status.Progress = &kilnv1.Progress{Step: &step}
	s.Put(failed)
	return s
}

func TestList(t *testing.T) {
	for name, tc := range map[string]struct {
		opts      Options
		tty       bool
		width     int
		generated bool
	}{
		"tty":                {tty: true},
		"pipe":               {},
		"all-namespaces-tty": {tty: true, opts: Options{AllNamespaces: true}},
		"wide-pipe":          {opts: Options{Output: "wide"}},
		"json":               {opts: Options{Output: "json", States: []string{"queued"}}},
		// Names are never cut, whatever the width: other columns shrink for them.
		"wide-tty-140": {tty: true, width: 140, generated: true, opts: Options{Output: "wide"}},
		"tty-80":       {tty: true, width: 80, generated: true},
	} {
		t.Run(name, func(t *testing.T) {
			s := fixture(t)
			if tc.generated {
				// Names as the server generates them for kiln submit without --name.
				for _, n := range []string{"torch-distributed-spot-x7k2p", "deepspeed-distributed-q9w4z"} {
					s.Put(kilntest.Job("team", n, kilnv1.State_STATE_RUNNING))
				}
			}
			f, io := s.Factory(tc.tty)
			if tc.width > 0 {
				io.SetWidth(tc.width)
			}
			tc.opts.Factory = f
			if err := run(t.Context(), &tc.opts); err != nil {
				t.Fatal(err)
			}
			kilntest.Golden(t, "list-"+name, io.Out.(interface{ String() string }).String())
		})
	}
}

func TestListErrors(t *testing.T) {
	f, io := kilntest.Start(t).Factory(true)
	if err := run(t.Context(), &Options{Factory: f}); err != nil {
		t.Fatal(err)
	}
	if got := io.ErrOut.(interface{ String() string }).String(); got != "No training jobs in namespace team.\n" {
		t.Errorf("empty list on a terminal says %q", got)
	}
	err := run(t.Context(), &Options{Factory: f, States: []string{"Sleeping"}})
	if factory.ExitCode(err) != factory.ExitUsage || err.Error() != `--state: unknown state "Sleeping": want one of Queued, Suspended, Running, Complete, Failed` {
		t.Errorf("bad --state = %v (exit %d)", err, factory.ExitCode(err))
	}
}
