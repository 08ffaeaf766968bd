package trainjob

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kiln-ml/kiln/api/telemetry"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// killDelay is how soon the reconcile that deletes the JobSet of a job whose deadline just
// fired runs (at killPriority).
const killDelay = time.Millisecond

// The active deadline: status.startTime is when the job last became active (cleared while
// it is suspended, set again on every resume); at startTime + activeDeadlineSeconds the job
// fails with DeadlineExceeded and its JobSet is deleted, its pods getting their grace period.

// applyDeadline keeps st.startTime and fails the job once its deadline passed. It returns
// how long until the deadline (0: none pending), or the event of a deadline that fired.
func applyDeadline(tj *trainer.TrainJob, st *trainer.TrainJobStatus, policy trainer.EffectiveRunPolicy, now time.Time, activeSince *time.Time) (time.Duration, *event) {
	start := metav1.NewTime(now.Truncate(time.Second))
	if activeSince != nil && !activeSince.After(now) {
		start = metav1.NewTime(activeSince.Truncate(time.Second))
	}
	suspended := ptr.Deref(tj.Spec.Suspend, false)
	if trainer.Finished(st) {
		return 0, nil
	}
	switch {
	case suspended:
		// The deadline never counts while suspended; it restarts on resume.
		st.StartTime = nil
		return 0, nil
	case st.StartTime == nil:
		st.StartTime = &start
	}
	if policy.ActiveDeadlineSeconds == nil {
		return 0, nil
	}
	due := st.StartTime.Add(time.Duration(*policy.ActiveDeadlineSeconds) * time.Second)
	if now.Before(due) {
		return due.Sub(now), nil
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, ObservedGeneration: tj.Generation,
		Reason: trainer.TrainJobDeadlineExceededReason, Message: trainer.TrainJobDeadlineExceededMessage,
	})
	orderConditions(st.Conditions)
	return 0, &event{kind: corev1.EventTypeWarning, reason: trainer.TrainJobDeadlineExceededReason,
		note: fmt.Sprintf("TrainJob was active for %ds, its activeDeadlineSeconds: deleting its JobSet", *policy.ActiveDeadlineSeconds)}
}

// deleteJobSetPastDeadline has the JobSet of a job that failed its deadline deleted (by the
// stopper, in the background), once that failure is stored: a TrainJob whose JobSet is gone
// but that is not yet known to have failed would otherwise create it again.
func (r *Reconciler) deleteJobSetPastDeadline(ctx context.Context, tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet, st *trainer.TrainJobStatus) {
	c := meta.FindStatusCondition(st.Conditions, trainer.TrainJobFailed)
	if js == nil || !js.DeletionTimestamp.IsZero() || c == nil || c.Status != metav1.ConditionTrue ||
		(c.Reason != trainer.TrainJobDeadlineExceededReason && c.Reason != trainer.TrainJobProgressDeadlineExceededReason) {
		return
	}
	traceStep(ctx, "delete JobSet (handed to the stopper)", time.Now(), nil)
	// The deletion is a span of the job's trace (the one its submission started).
	r.stopper.stop(telemetry.FromAnnotations(ctx, tj.Annotations), js)
}
