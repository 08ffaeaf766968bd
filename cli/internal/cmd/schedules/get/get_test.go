package get

import (
	"testing"

	"connectrpc.com/connect"

	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestGet(t *testing.T) {
	s := kilntest.StartWithSchedules(t)
	f, io := s.Factory(false)
	out, _, err := kilntest.Execute(NewCmdGet(f, nil), io, "weekly-retrain")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	kilntest.Golden(t, "schedule-get", out)
	f, io = s.Factory(false)
	_, _, err = kilntest.Execute(NewCmdGet(f, nil), io, "missing")
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("get missing: %v, want NotFound", err)
	}
}
