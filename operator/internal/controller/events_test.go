package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestTransitions(t *testing.T) {
	job := kilntesting.MakeTrainJob("job", "ns")
	with := func(t, s, reason string) trainer.TrainJobStatus {
		return job.Clone().Condition(t, metav1.ConditionStatus(s), reason, "msg").Obj().Status
	}
	cases := map[string]struct {
		before, after trainer.TrainJobStatus
		want          []string
	}{
		"nothing changed":      {before: with(trainer.TrainJobSuspended, "True", "Suspended"), after: with(trainer.TrainJobSuspended, "True", "Suspended")},
		"suspended":            {after: with(trainer.TrainJobSuspended, "True", "Suspended"), want: []string{"Normal Suspended"}},
		"resumed":              {before: with(trainer.TrainJobSuspended, "True", "Suspended"), after: with(trainer.TrainJobSuspended, "False", "Resumed"), want: []string{"Normal Resumed"}},
		"completed":            {after: with(trainer.TrainJobComplete, "True", "AllJobsCompleted"), want: []string{"Normal Completed"}},
		"failed":               {after: with(trainer.TrainJobFailed, "True", "FailedJobs"), want: []string{"Warning Failed"}},
		"deadline: own event":  {after: with(trainer.TrainJobFailed, "True", trainer.TrainJobDeadlineExceededReason)},
		"no runtime: own":      {after: with(trainer.TrainJobFailed, "True", trainer.TrainJobRuntimeNotFoundReason)},
		"JobSet refused: own":  {after: with(trainer.TrainJobFailed, "True", trainer.TrainJobJobSetRejectedReason)},
		"runtime found: quiet": {before: with(trainer.TrainJobFailed, "True", trainer.TrainJobRuntimeNotFoundReason), after: with(trainer.TrainJobFailed, "False", trainer.TrainJobRuntimeFoundReason)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range transitions(&tc.before, &tc.after) {
				got = append(got, e.kind+" "+e.reason)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
