package trigger

import (
	"testing"

	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestTrigger(t *testing.T) {
	s := kilntest.Start(t)
	s.PutSchedule(kilntest.Schedule("team", "weekly-retrain"))
	f, io := s.Factory(false)
	out, _, err := kilntest.Execute(NewCmdTrigger(f, nil), io, "weekly-retrain", "--request-id", "r1")
	if err != nil || out != "trainjob team/weekly-retrain-mbcdf created (a run of schedule weekly-retrain)\n" {
		t.Fatalf("trigger: %q, %v", out, err)
	}
	if s.Triggered[0].GetRequestId() != "r1" {
		t.Errorf("trigger sent request id %q", s.Triggered[0].GetRequestId())
	}
	f, io = s.Factory(false)
	out, _, err = kilntest.Execute(NewCmdTrigger(f, nil), io, "weekly-retrain", "-o", "name")
	if err != nil || out != "weekly-retrain-mbcdf\n" || s.Triggered[1].GetRequestId() == "" {
		t.Fatalf("trigger -o name: %q, %v", out, err)
	}
}
