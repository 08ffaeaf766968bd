package kiln

import (
	"testing"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

func TestJobRestarts(t *testing.T) {
	j := jobOf(&kilnv1.TrainJob{Name: "llm", Status: &kilnv1.TrainJobStatus{
		Restarts: &kilnv1.Restarts{Count: 2, CountedTowardsMax: 1, MaxRestarts: 3, LastReason: "Disruption"},
	}})
	if j.Restarts != 2 || j.RestartsCounted != 1 {
		t.Errorf("restarts %d, counted %d; want 2, 1", j.Restarts, j.RestartsCounted)
	}
	if j := jobOf(&kilnv1.TrainJob{Name: "plain", Status: &kilnv1.TrainJobStatus{}}); j.Restarts != 0 || j.RestartsCounted != 0 {
		t.Errorf("a job without a failure policy: restarts %d, counted %d; want 0, 0", j.Restarts, j.RestartsCounted)
	}
}
