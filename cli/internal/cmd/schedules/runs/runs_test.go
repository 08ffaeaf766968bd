package runs

import (
	"testing"

	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestRuns(t *testing.T) {
	f, io := kilntest.StartWithSchedules(t).Factory(false)
	out, _, err := kilntest.Execute(NewCmdRuns(f, nil), io, "weekly-retrain")
	if err != nil {
		t.Fatalf("runs: %v", err)
	}
	kilntest.Golden(t, "schedule-runs", out)
}
