package resume

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestNewCmdResume(t *testing.T) {
	for name, tc := range map[string]struct {
		args     []string
		wantName string
		wantErr  bool
	}{
		"a name":    {args: []string{"mnist"}, wantName: "mnist"},
		"no name":   {wantErr: true},
		"two names": {args: []string{"a", "b"}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			io, _, _, _ := iostreams.Test()
			var got *Options
			cmd := NewCmdResume(&factory.Factory{IO: io}, func(_ context.Context, o *Options) error {
				got = o
				return nil
			})
			cmd.SetArgs(tc.args)
			cmd.SetOut(io.Out)
			cmd.SetErr(io.ErrOut)
			err := cmd.Execute()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Execute() = %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.wantName, got.Name); diff != "" {
				t.Errorf("name (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResume(t *testing.T) {
	s := kilntest.Start(t)
	for name, tty := range map[string]bool{"resume-tty": true, "resume-pipe": false} {
		t.Run(name, func(t *testing.T) {
			s.Put(kilntest.Job("team", "mnist", kilnv1.State_STATE_SUSPENDED))
			f, io := s.Factory(tty)
			if err := run(t.Context(), &Options{Factory: f, Name: "mnist"}); err != nil {
				t.Fatal(err)
			}
			kilntest.Golden(t, name, "stdout:\n"+io.Out.(interface{ String() string }).String()+"stderr:\n"+io.ErrOut.(interface{ String() string }).String())
			if got := s.Job("team", "mnist").GetStatus().GetState(); got != kilnv1.State_STATE_RUNNING {
				t.Errorf("the job is %v on the server, want %v", got, kilnv1.State_STATE_RUNNING)
			}
		})
	}
	f, _ := s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f, Name: "nope"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("a missing job = %v, want NotFound", err)
	}
}
