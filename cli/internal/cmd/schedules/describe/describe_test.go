package describe

import (
	"testing"

	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestDescribe(t *testing.T) {
	f, io := kilntest.StartWithSchedules(t).Factory(true)
	out, _, err := kilntest.Execute(NewCmdDescribe(f, nil), io, "weekly-retrain")
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	kilntest.Golden(t, "schedule-describe", out)
}
