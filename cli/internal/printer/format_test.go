package printer

import (
	"testing"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

func TestJobState(t *testing.T) {
	cases := map[string]struct {
		state  kilnv1.State
		reason string
		want   string
	}{
		"running":                       {kilnv1.State_STATE_RUNNING, "Running", "Running"},
		"pods being scheduled":          {kilnv1.State_STATE_RUNNING, "Starting", "Running"},
		"pods waiting for a claim":      {kilnv1.State_STATE_RUNNING, "WaitingForVolume", "Starting"},
		"pods waiting for an image":     {kilnv1.State_STATE_RUNNING, "WaitingForImage", "Starting"},
		"queued, whatever its reason":   {kilnv1.State_STATE_QUEUED, "WaitingForVolume", "Queued"},
		"failed keeps its state's name": {kilnv1.State_STATE_FAILED, "DeadlineExceeded", "Failed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := JobState(&kilnv1.TrainJobStatus{State: tc.state, Reason: tc.reason}); got != tc.want {
				t.Errorf("JobState = %q, want %q", got, tc.want)
			}
		})
	}
}
