package suspend

import (
	"testing"

	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestSuspendResume(t *testing.T) {
	s := kilntest.Start(t)
	s.PutSchedule(kilntest.Schedule("team", "weekly-retrain"))
	f, io := s.Factory(false)
	out, _, err := kilntest.Execute(NewCmdSuspend(f, nil), io, "weekly-retrain")
	if err != nil || out != "crontrainjob team/weekly-retrain suspended\n" {
		t.Fatalf("suspend: %q, %v", out, err)
	}
	if got, _ := s.Schedules["team/weekly-retrain"]; !got.GetSpec().GetSuspend() {
		t.Error("the schedule is not suspended")
	}
	f, io = s.Factory(false)
	out, _, err = kilntest.Execute(NewCmdResume(f, nil), io, "weekly-retrain")
	if err != nil || out != "crontrainjob team/weekly-retrain resumed\n" || s.Schedules["team/weekly-retrain"].GetSpec().GetSuspend() {
		t.Fatalf("resume: %q, %v", out, err)
	}
}
