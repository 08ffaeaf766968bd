package delete

import (
	"testing"

	"connectrpc.com/connect"

	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestDelete(t *testing.T) {
	s := kilntest.Start(t)
	s.PutSchedule(kilntest.Schedule("team", "weekly-retrain"))
	f, io := s.Factory(false)
	out, _, err := kilntest.Execute(NewCmdDelete(f, nil), io, "weekly-retrain", "--keep-runs")
	if err != nil || out != "crontrainjob team/weekly-retrain (its runs kept) deleted\n" {
		t.Fatalf("delete: %q, %v", out, err)
	}
	f, io = s.Factory(false)
	if _, _, err := kilntest.Execute(NewCmdDelete(f, nil), io, "weekly-retrain"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("deleting it again: %v, want NotFound", err)
	}
}
