package list

import (
	"testing"

	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestList(t *testing.T) {
	s := kilntest.StartWithSchedules(t)
	for name, tc := range map[string]struct {
		args []string
		tty  bool
	}{
		"list-tty":  {tty: true},
		"list-pipe": {args: []string{"-o", "wide"}},
	} {
		f, io := s.Factory(tc.tty)
		out, _, err := kilntest.Execute(NewCmdList(f, nil), io, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kilntest.Golden(t, "schedule-"+name, out)
	}
}
