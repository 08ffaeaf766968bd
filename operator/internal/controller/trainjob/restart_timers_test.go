package trainjob

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestTimerDueAtStart(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(t0.Add(d))) }
	failed := []metav1.Condition{{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue}}
	job := func(suspend bool, ads *int64, ttl *int32, st trainer.TrainJobStatus) *trainer.TrainJob {
		return &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{CreationTimestamp: *at(-time.Hour)},
			Spec:       trainer.TrainJobSpec{Suspend: ptr.To(suspend), ActiveDeadlineSeconds: ads, TTLSecondsAfterFinished: ttl},
			Status:     st,
		}
	}
	resumedAt := func(tj *trainer.TrainJob, d time.Duration) *trainer.TrainJob {
		tj.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kueue", Operation: metav1.ManagedFieldsOperationUpdate,
			Time: at(d), FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:suspend":{}}}`)}}
		return tj
	}
	cases := map[string]struct {
		tj   *trainer.TrainJob
		want *time.Duration // nil: not known
	}{
		"deadline passed":     {job(false, ptr.To[int64](60), nil, trainer.TrainJobStatus{StartTime: at(-2 * time.Minute)}), ptr.To(-time.Minute)},
		"deadline in an hour": {job(false, ptr.To[int64](3600), nil, trainer.TrainJobStatus{StartTime: at(0)}), ptr.To(time.Hour)},
		"resumed, no startTime yet: from the resume's write": {
			resumedAt(job(false, ptr.To[int64](60), nil, trainer.TrainJobStatus{}), -30*time.Second), ptr.To(30 * time.Second)},
		"not started, resume unknown: from now, as its first reconcile will count": {job(false, ptr.To[int64](60), nil, trainer.TrainJobStatus{}), ptr.To(time.Minute)},
		"no deadline of its own (the runtime's?)":                                  {job(false, nil, nil, trainer.TrainJobStatus{StartTime: at(-time.Hour)}), nil},
		"suspended: no deadline counts":                                            {job(true, ptr.To[int64](60), nil, trainer.TrainJobStatus{StartTime: at(-time.Hour)}), nil},
		"TTL passed":                                                               {job(false, nil, ptr.To[int32](5), trainer.TrainJobStatus{CompletionTime: at(-time.Minute), Conditions: failed}), ptr.To(-55 * time.Second)},
		"TTL in an hour":                                                           {job(false, nil, ptr.To[int32](3600), trainer.TrainJobStatus{CompletionTime: at(0), Conditions: failed}), ptr.To(time.Hour)},
		"finished, maybe a TTL from its runtime":                                   {job(false, nil, nil, trainer.TrainJobStatus{CompletionTime: at(-time.Hour), Conditions: failed}), ptr.To(time.Duration(0))},
		"being deleted": {func() *trainer.TrainJob {
			tj := job(false, nil, ptr.To[int32](5), trainer.TrainJobStatus{CompletionTime: at(-time.Minute), Conditions: failed})
			tj.DeletionTimestamp = at(0)
			return tj
		}(), nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, known := timerDue(tc.tj, t0)
			switch {
			case tc.want == nil && known:
				t.Fatalf("timerDue = %v, want none", got)
			case tc.want != nil && (!known || !got.Equal(t0.Add(*tc.want))):
				t.Fatalf("timerDue = %v (%v), want %v", got, known, t0.Add(*tc.want))
			}
		})
	}
}
