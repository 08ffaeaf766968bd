package logs

import (
	"testing"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestLogs(t *testing.T) {
	s := kilntest.Start(t)
	s.Put(kilntest.Job("team", "mnist", kilnv1.State_STATE_RUNNING))
	s.Logs["node-0"] = []string{"step 1 loss=2.31", "step 2 loss=1.87"}
	s.Logs["node-1"] = []string{"step 1 loss=2.30", "step 2 loss=1.86"}
	for name, tc := range map[string]struct {
		opts Options
		want string
	}{
		"every step, prefixed": {Options{Tail: -1}, "[node-0] step 1 loss=2.31\n[node-0] step 2 loss=1.87\n[node-1] step 1 loss=2.30\n[node-1] step 2 loss=1.86\n"},
		"one step":             {Options{Step: "node-1", Tail: -1}, "step 1 loss=2.30\nstep 2 loss=1.86\n"},
		"tail":                 {Options{Step: "node-0", Tail: 1}, "step 2 loss=1.87\n"},
	} {
		t.Run(name, func(t *testing.T) {
			f, io := s.Factory(false)
			tc.opts.Factory, tc.opts.Name = f, "mnist"
			if err := run(t.Context(), &tc.opts); err != nil {
				t.Fatal(err)
			}
			if got := io.Out.(interface{ String() string }).String(); got != tc.want {
				t.Errorf("output:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
	f, _ := s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f, Name: "mnist", Tail: -5}); err == nil {
		t.Errorf("--tail -5 accepted")
	}
}
