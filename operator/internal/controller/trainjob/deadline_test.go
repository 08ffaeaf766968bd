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

func TestApplyDeadline(t *testing.T) {
	hour := trainer.EffectiveRunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3600)}
	cases := map[string]struct {
		job         *trainer.TrainJob
		policy      trainer.EffectiveRunPolicy
		now         time.Duration
		activeSince *time.Time
		wantStart   *metav1.Time
		wantDue     time.Duration
		wantFired   bool
	}{
		"no deadline: startTime only": {
			job: kilntesting.MakeTrainJob("j", "ns").Obj(), now: 1500 * time.Millisecond,
			wantStart: ptr.To(metav1.NewTime(t0.Add(time.Second))),
		},
		"counts from when the job became active": {
			job: kilntesting.MakeTrainJob("j", "ns").Obj(), policy: hour, now: 30 * time.Minute, activeSince: ptr.To(t0.Add(10 * time.Minute)),
			wantStart: ptr.To(metav1.NewTime(t0.Add(10 * time.Minute))), wantDue: 40 * time.Minute,
		},
		"an activeSince in the future counts from now": {
			job: kilntesting.MakeTrainJob("j", "ns").Obj(), policy: hour, now: time.Minute, activeSince: ptr.To(t0.Add(time.Hour)),
			wantStart: ptr.To(metav1.NewTime(t0.Add(time.Minute))), wantDue: time.Hour,
		},
		"suspended: startTime cleared, no deadline": {
			job: kilntesting.MakeTrainJob("j", "ns").Suspend(true).StartTime(t0).Obj(), policy: hour, now: 2 * time.Hour,
		},
		"due": {
			job: kilntesting.MakeTrainJob("j", "ns").StartTime(t0).Obj(), policy: hour, now: time.Hour,
			wantStart: ptr.To(metav1.NewTime(t0)), wantFired: true,
		},
		"finished jobs keep their startTime and never fire": {
			job:    kilntesting.MakeTrainJob("j", "ns").StartTime(t0).Condition(trainer.TrainJobComplete, metav1.ConditionTrue, "Done", "").Obj(),
			policy: hour, now: 5 * time.Hour, wantStart: ptr.To(metav1.NewTime(t0)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.job.Status.DeepCopy()
			due, fired := applyDeadline(tc.job, st, tc.policy, t0.Add(tc.now), tc.activeSince)
			if diff := cmp.Diff(tc.wantStart, st.StartTime); diff != "" {
				t.Errorf("startTime (-want +got):\n%s", diff)
			}
			if due != tc.wantDue || (fired != nil) != tc.wantFired {
				t.Errorf("applyDeadline = %v, fired %v; want %v, fired %v", due, fired != nil, tc.wantDue, tc.wantFired)
			}
			if want := tc.wantFired || trainer.Finished(&tc.job.Status); trainer.Finished(st) != want {
				t.Errorf("finished = %v, want %v (the deadline fired: %v)", trainer.Finished(st), want, tc.wantFired)
			}
		})
	}
}
