package suspend

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

type newCmdFunc func(*factory.Factory, func(context.Context, *Options) error) *cobra.Command

func TestNewCmd(t *testing.T) {
	for name, tc := range map[string]struct {
		newCmd      newCmdFunc
		args        []string
		wantOptions *Options
		wantErr     bool
	}{
		"suspend a name":    {newCmd: NewCmdSuspend, args: []string{"mnist"}, wantOptions: &Options{Name: "mnist", Suspend: true}},
		"suspend no name":   {newCmd: NewCmdSuspend, wantErr: true},
		"suspend two names": {newCmd: NewCmdSuspend, args: []string{"a", "b"}, wantErr: true},
		"resume a name":     {newCmd: NewCmdResume, args: []string{"mnist"}, wantOptions: &Options{Name: "mnist"}},
		"resume no name":    {newCmd: NewCmdResume, wantErr: true},
		"resume two names":  {newCmd: NewCmdResume, args: []string{"a", "b"}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			io, _, _, _ := iostreams.Test()
			var got *Options
			cmd := tc.newCmd(&factory.Factory{IO: io}, func(_ context.Context, o *Options) error {
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
			got.Factory = nil
			if diff := cmp.Diff(tc.wantOptions, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRun(t *testing.T) {
	s := kilntest.Start(t)
	for name, tc := range map[string]struct {
		from    kilnv1.State
		suspend bool
		tty     bool
		want    kilnv1.State
	}{
		"suspend-tty":  {from: kilnv1.State_STATE_RUNNING, suspend: true, tty: true, want: kilnv1.State_STATE_SUSPENDED},
		"suspend-pipe": {from: kilnv1.State_STATE_RUNNING, suspend: true, want: kilnv1.State_STATE_SUSPENDED},
		"resume-tty":   {from: kilnv1.State_STATE_SUSPENDED, tty: true, want: kilnv1.State_STATE_RUNNING},
		"resume-pipe":  {from: kilnv1.State_STATE_SUSPENDED, want: kilnv1.State_STATE_RUNNING},
	} {
		t.Run(name, func(t *testing.T) {
			s.Put(kilntest.Job("team", "mnist", tc.from))
			f, io := s.Factory(tc.tty)
			if err := run(t.Context(), &Options{Factory: f, Name: "mnist", Suspend: tc.suspend}); err != nil {
				t.Fatal(err)
			}
			kilntest.Golden(t, name, "stdout:\n"+io.Out.(interface{ String() string }).String()+"stderr:\n"+io.ErrOut.(interface{ String() string }).String())
			if got := s.Job("team", "mnist").GetStatus().GetState(); got != tc.want {
				t.Errorf("the job is %v on the server, want %v", got, tc.want)
			}
		})
	}
	f, _ := s.Factory(false)
	for _, suspend := range []bool{true, false} {
		if err := run(t.Context(), &Options{Factory: f, Name: "nope", Suspend: suspend}); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("a missing job (suspend %v) = %v, want NotFound", suspend, err)
		}
	}
}
