package trainjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestApplyLifecycle(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }
	complete := []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted"}}
	hour := trainer.EffectiveRunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3600)}
	ttl := trainer.EffectiveRunPolicy{TTLSecondsAfterFinished: ptr.To[int32](60)}
	cases := map[string]struct {
		suspended      bool
		status         trainer.TrainJobStatus
		policy         trainer.EffectiveRunPolicy
		now            time.Duration
		admitted       *time.Duration
		wantStart      *metav1.Time
		wantCompletion *metav1.Time
		wantFailed     string
		want           lifecycleActions
	}{
		"starts counting when active": {
			policy: hour, now: 1500 * time.Millisecond,
			wantStart: at(time.Second), want: lifecycleActions{requeueAfter: 3600*time.Second - 500*time.Millisecond},
		},
		"a queued job counts from its admission, even when seen late": {
			policy: hour, admitted: ptr.To(10 * time.Minute), now: 30 * time.Minute,
			wantStart: at(10 * time.Minute), want: lifecycleActions{requeueAfter: 40 * time.Minute},
		},
		"suspended: no start, no deadline": {
			suspended: true, status: trainer.TrainJobStatus{StartTime: at(0)}, policy: hour, now: 2 * time.Hour,
		},
		"deadline not yet due": {
			status: trainer.TrainJobStatus{StartTime: at(0)}, policy: hour, now: 59 * time.Minute,
			wantStart: at(0), want: lifecycleActions{requeueAfter: time.Minute},
		},
		"deadline due, even if it passed while the operator was down": {
			status: trainer.TrainJobStatus{StartTime: at(0)}, policy: hour, now: 5 * time.Hour,
			wantStart: at(0), wantCompletion: at(5 * time.Hour), wantFailed: trainer.TrainJobDeadlineExceededReason,
			want: lifecycleActions{deleteJobSet: true, deadlineDue: t0.Add(time.Hour)},
		},
		"completion time set once finished": {
			status: trainer.TrainJobStatus{StartTime: at(0), Conditions: complete}, now: 10 * time.Second,
			wantStart: at(0), wantCompletion: at(10 * time.Second),
		},
		"TTL not yet due": {
			status: trainer.TrainJobStatus{StartTime: at(0), CompletionTime: at(time.Minute), Conditions: complete}, policy: ttl, now: 90 * time.Second,
			wantStart: at(0), wantCompletion: at(time.Minute), want: lifecycleActions{requeueAfter: 30 * time.Second},
		},
		"TTL due": {
			status: trainer.TrainJobStatus{StartTime: at(0), CompletionTime: at(time.Minute), Conditions: complete}, policy: ttl, now: 2 * time.Minute,
			wantStart: at(0), wantCompletion: at(time.Minute), want: lifecycleActions{deleteTrainJob: true, ttlDue: t0.Add(2 * time.Minute)},
		},
		"TTL 0 deletes as soon as finished": {
			status: trainer.TrainJobStatus{StartTime: at(0), Conditions: complete}, policy: trainer.EffectiveRunPolicy{TTLSecondsAfterFinished: ptr.To[int32](0)}, now: 5 * time.Second,
			wantStart: at(0), wantCompletion: at(5 * time.Second), want: lifecycleActions{deleteTrainJob: true, ttlDue: t0.Add(5 * time.Second)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{Spec: trainer.TrainJobSpec{Suspend: ptr.To(tc.suspended)}}
			st := tc.status.DeepCopy()
			var admitted *time.Time
			if tc.admitted != nil {
				admitted = ptr.To(t0.Add(*tc.admitted))
			}
			got := applyLifecycle(tj, st, tc.policy, t0.Add(tc.now), admitted)
			got.events, got.ttlExpired = nil, nil
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(lifecycleActions{})); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStart, st.StartTime); diff != "" {
				t.Errorf("startTime (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCompletion, st.CompletionTime); diff != "" {
				t.Errorf("completionTime (-want +got):\n%s", diff)
			}
			var failed string
			if c := meta.FindStatusCondition(st.Conditions, trainer.TrainJobFailed); c != nil && c.Status == metav1.ConditionTrue {
				failed = c.Reason
				if c.Reason == trainer.TrainJobDeadlineExceededReason && c.Message != "TrainJob exceeded its active deadline" {
					t.Errorf("message = %q", c.Message)
				}
			}
			if failed != tc.wantFailed {
				t.Errorf("Failed reason = %q, want %q", failed, tc.wantFailed)
			}
		})
	}
}
