package logs

import (
	"strings"
	"testing"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestLogs(t *testing.T) {
	s := kilntest.Start(t)
	s.Put(kilntest.Job("team", "mnist", kilnv1.State_STATE_RUNNING))
	s.Logs["node-0"] = []string{"step 1 loss=2.31", "step 2 loss=1.87"}
	s.Logs["node-1"] = []string{"step 1 loss=2.30", "step 2 loss=1.86"}
	s.KeptLogs = map[int32]map[string][]string{
		0: {"node-0": {"step 9", "SIGTERM: saving an emergency checkpoint at step 9"}, "node-1": {"step 9"}},
	}
	for name, tc := range map[string]struct {
		opts Options
		want string
	}{
		"every step, prefixed": {Options{Tail: -1, Attempt: -1}, "[node-0] step 1 loss=2.31\n[node-0] step 2 loss=1.87\n[node-1] step 1 loss=2.30\n[node-1] step 2 loss=1.86\n"},
		"one step":             {Options{Step: "node-1", Tail: -1, Attempt: -1}, "step 1 loss=2.30\nstep 2 loss=1.86\n"},
		"tail":                 {Options{Step: "node-0", Tail: 1, Attempt: -1}, "step 2 loss=1.87\n"},
		"the previous attempt, each line saying so": {Options{Tail: -1, Attempt: -1, Previous: true},
			"[node-0 attempt 0] step 9\n[node-0 attempt 0] SIGTERM: saving an emergency checkpoint at step 9\n[node-1 attempt 0] step 9\n"},
		"an attempt, one step": {Options{Tail: 1, Attempt: 0, Step: "node-0"}, "SIGTERM: saving an emergency checkpoint at step 9\n"},
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
	if err := run(t.Context(), &Options{Factory: f, Name: "mnist", Tail: -5, Attempt: -1}); err == nil {
		t.Errorf("--tail -5 accepted")
	}
	for name, tc := range map[string]struct {
		opts Options
		want string
	}{
		"attempt and previous": {Options{Tail: -1, Attempt: 1, Previous: true}, "--attempt and --previous: give one"},
		"follow a kept log":    {Options{Tail: -1, Previous: true, Attempt: -1, Follow: true}, "an earlier attempt's log is complete"},
		"an attempt not kept":  {Options{Tail: -1, Attempt: 4}, "no log of attempt 4 was kept"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.opts.Factory, tc.opts.Name = f, "mnist"
			if err := run(t.Context(), &tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
