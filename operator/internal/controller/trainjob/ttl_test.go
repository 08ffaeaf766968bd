package trainjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestApplyTTL(t *testing.T) {
	minute := trainer.EffectiveRunPolicy{TTLSecondsAfterFinished: ptr.To[int32](60)}
	done := kilntesting.MakeTrainJob("j", "ns").Condition(trainer.TrainJobFailed, metav1.ConditionTrue, "BackoffLimitExceeded", "")
	cases := map[string]struct {
		job            *trainer.TrainJob
		policy         trainer.EffectiveRunPolicy
		now            time.Duration
		wantCompletion *metav1.Time
		wantDue        time.Duration
		wantExpired    bool
	}{
		"running: nothing": {job: kilntesting.MakeTrainJob("j", "ns").Obj(), policy: minute, now: time.Hour},
		"a missing runtime does not finish a job": {
			job: kilntesting.MakeTrainJob("j", "ns").Condition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobRuntimeNotFoundReason, "").Obj(), policy: minute, now: time.Hour,
		},
		"finished: completionTime set, TTL pending": {
			job: done.Clone().Obj(), policy: minute, now: 10 * time.Second,
			wantCompletion: ptr.To(metav1.NewTime(t0.Add(10 * time.Second))), wantDue: time.Minute,
		},
		"finished without a TTL": {
			job: done.Clone().Obj(), now: 10 * time.Second, wantCompletion: ptr.To(metav1.NewTime(t0.Add(10 * time.Second))),
		},
		"expired, even long after (the operator was down)": {
			job: done.Clone().CompletionTime(t0).Obj(), policy: minute, now: 24 * time.Hour,
			wantCompletion: ptr.To(metav1.NewTime(t0)), wantExpired: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.job.Status.DeepCopy()
			now := t0.Add(tc.now)
			due, expired := applyTTL(st, tc.policy, metav1.NewTime(now.Truncate(time.Second)), now)
			if diff := cmp.Diff(tc.wantCompletion, st.CompletionTime); diff != "" {
				t.Errorf("completionTime (-want +got):\n%s", diff)
			}
			if due != tc.wantDue || (expired != nil) != tc.wantExpired {
				t.Errorf("applyTTL = %v, expired %v; want %v, expired %v", due, expired != nil, tc.wantDue, tc.wantExpired)
			}
		})
	}
}
