package trainjob

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestMirrorOnly(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	base := trainer.TrainJobStatus{
		Conditions: []metav1.Condition{{Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse, Reason: trainer.TrainJobResumedReason, ObservedGeneration: 2}},
		JobsStatus: []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](2)}},
		StartTime:  &now,
	}
	for _, tc := range []struct {
		name   string
		change func(*trainer.TrainJobStatus)
		mirror bool
	}{
		{"nothing", func(*trainer.TrainJobStatus) {}, true},
		{"counts within their state", func(st *trainer.TrainJobStatus) { st.JobsStatus[0].Active = ptr.To[int32](1) }, true},
		{"a new replicated job with no pods", func(st *trainer.TrainJobStatus) {
			st.JobsStatus = append(st.JobsStatus, trainer.JobStatus{Name: "launcher"})
		}, true},
		// A transition of a Job's pods a client can wait for is written at once.
		{"its pods become ready", func(st *trainer.TrainJobStatus) { st.JobsStatus[0].Ready = ptr.To[int32](1) }, false},
		{"its pods are no longer active", func(st *trainer.TrainJobStatus) { st.JobsStatus[0].Active = ptr.To[int32](0) }, false},
		{"a new replicated job's pods active", func(st *trainer.TrainJobStatus) {
			st.JobsStatus = append(st.JobsStatus, trainer.JobStatus{Name: "launcher", Active: ptr.To[int32](1)})
		}, false},
		{"observedGeneration", func(st *trainer.TrainJobStatus) { st.Conditions[0].ObservedGeneration = 3 }, true},
		{"a condition's status", func(st *trainer.TrainJobStatus) { st.Conditions[0].Status = metav1.ConditionTrue }, false},
		{"a new condition", func(st *trainer.TrainJobStatus) {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue})
		}, false},
		{"startTime", func(st *trainer.TrainJobStatus) { st.StartTime = nil }, false},
		{"completionTime", func(st *trainer.TrainJobStatus) { st.CompletionTime = &now }, false},
	} {
		after := base.DeepCopy()
		tc.change(after)
		if got := mirrorOnly(&base, after); got != tc.mirror {
			t.Errorf("%s: mirrorOnly = %v, want %v", tc.name, got, tc.mirror)
		}
	}
}

func TestQuietMirror(t *testing.T) {
	counts := func(active, ready, succeeded, failed, suspended int32) trainer.JobStatus {
		return trainer.JobStatus{Name: "node", Active: ptr.To(active), Ready: ptr.To(ready), Succeeded: ptr.To(succeeded), Failed: ptr.To(failed), Suspended: ptr.To(suspended)}
	}
	resumed := []metav1.Condition{{Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse, Reason: trainer.TrainJobResumedReason, ObservedGeneration: 2}}
	for _, tc := range []struct {
		name          string
		before, after trainer.TrainJobStatus
		quiet         bool
	}{
		{"the JobSet created suspended: zeros where there were none",
			trainer.TrainJobStatus{}, trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{counts(0, 0, 0, 0, 0)}}, true},
		{"the JobSet's Jobs suspended, then not",
			trainer.TrainJobStatus{Conditions: resumed, JobsStatus: []trainer.JobStatus{counts(0, 0, 0, 0, 0)}},
			trainer.TrainJobStatus{Conditions: resumed, JobsStatus: []trainer.JobStatus{counts(0, 0, 0, 0, 1)}}, true},
		{"a pod started",
			trainer.TrainJobStatus{Conditions: resumed, JobsStatus: []trainer.JobStatus{counts(0, 0, 0, 0, 1)}},
			trainer.TrainJobStatus{Conditions: resumed, JobsStatus: []trainer.JobStatus{counts(1, 0, 0, 0, 0)}}, false},
		{"ready", trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{counts(1, 0, 0, 0, 0)}}, trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{counts(1, 1, 0, 0, 0)}}, false},
		{"succeeded", trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{counts(1, 1, 0, 0, 0)}}, trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{counts(0, 0, 1, 0, 0)}}, false},
		{"failed", trainer.TrainJobStatus{}, trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{counts(0, 0, 0, 1, 0)}}, false},
		{"pods gone: counts to zero", trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{counts(2, 2, 0, 0, 0)}}, trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{counts(0, 0, 0, 0, 2)}}, false},
		{"a condition with it",
			trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{counts(0, 0, 0, 0, 0)}},
			trainer.TrainJobStatus{Conditions: resumed, JobsStatus: []trainer.JobStatus{counts(0, 0, 0, 0, 1)}}, false},
		{"observedGeneration with it",
			trainer.TrainJobStatus{Conditions: resumed},
			trainer.TrainJobStatus{Conditions: []metav1.Condition{{Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse, Reason: trainer.TrainJobResumedReason, ObservedGeneration: 3}},
				JobsStatus: []trainer.JobStatus{counts(0, 0, 0, 0, 0)}}, false},
	} {
		if got := quietMirror(&tc.before, &tc.after); got != tc.quiet {
			t.Errorf("%s: quietMirror = %v, want %v", tc.name, got, tc.quiet)
		}
	}
}

func TestMirrorBatches(t *testing.T) {
	tj := types.NamespacedName{Namespace: "ns", Name: "job"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b statusBatches
	if got := b.wait(tj, false, now); got != 0 {
		t.Fatalf("a change that means something waits %s", got)
	}
	if got := b.wait(tj, true, now); got != statusBatchPeriod {
		t.Fatalf("a first mirrored change waits %s, want the period", got)
	}
	// A later mirrored change waits for the same write, not a period of its own.
	if got := b.wait(tj, true, now.Add(300*time.Millisecond)); got != statusBatchPeriod-300*time.Millisecond {
		t.Fatalf("a second mirrored change waits %s", got)
	}
	if got := b.wait(tj, true, now.Add(statusBatchPeriod)); got != 0 {
		t.Fatalf("at the end of the period, it still waits %s", got)
	}
	// Written: the next mirrored change starts a new period.
	if got := b.wait(tj, true, now.Add(2*statusBatchPeriod)); got != statusBatchPeriod {
		t.Fatalf("after a write, a mirrored change waits %s, want the period", got)
	}
	// A change that means something is written at once, and carries the one that waited.
	if got := b.wait(tj, false, now.Add(2*statusBatchPeriod+time.Millisecond)); got != 0 {
		t.Fatalf("a change that means something waits %s", got)
	}
	if got := b.wait(tj, true, now.Add(2*statusBatchPeriod+2*time.Millisecond)); got != statusBatchPeriod {
		t.Fatalf("after that write, a mirrored change waits %s, want the period", got)
	}
	b.forget(tj)
	if got := b.wait(tj, false, now); got != 0 {
		t.Fatalf("forgotten, yet waits %s", got)
	}
}
