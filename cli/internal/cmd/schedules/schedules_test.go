package schedules

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

// `kiln schedules` wires the verbs, each tested in its package; through it they run as
// `kiln schedules VERB`.
func TestNewCmdSchedules(t *testing.T) {
	s := kilntest.StartWithSchedules(t)
	f, io := s.Factory(false)
	cmd := NewCmdSchedules(f)
	var verbs []string
	for _, c := range cmd.Commands() {
		verbs = append(verbs, c.Name())
	}
	if diff := cmp.Diff([]string{"create", "delete", "describe", "get", "list", "resume", "runs", "suspend", "trigger"}, verbs); diff != "" {
		t.Errorf("verbs (-want +got):\n%s", diff)
	}
	out, _, err := kilntest.Execute(cmd, io, "ls", "-o", "wide")
	if err != nil || out == "" {
		t.Errorf("kiln schedules ls -o wide: %q, %v", out, err)
	}
}
