package controller

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// lifecycleActions is what the lifecycle rules ask of one reconcile.
type lifecycleActions struct {
	// deleteJobSet: the deadline passed; every pod must go (with its grace period).
	deleteJobSet bool
	// deleteTrainJob: the TTL after finishing passed.
	deleteTrainJob bool
	// requeueAfter is the next instant a rule falls due (0: none).
	requeueAfter time.Duration
	events       []event
}

// applyLifecycle sets startTime, completionTime and the deadline's outcome on st, from the
// persisted spec and status only (no in-memory timers: a rule that fell due while the
// operator was down fires on the next reconcile), and says what else is due and when.
// Times are whole seconds, as the API stores them, so that every reconcile computes the
// same instants.
//
// activeSince, when known, is when the job became active: Kueue's admission time for a
// queued job. Otherwise the job counts as active from now.
func applyLifecycle(tj *trainer.TrainJob, st *trainer.TrainJobStatus, policy trainer.EffectiveRunPolicy, now time.Time, activeSince *time.Time) lifecycleActions {
	var out lifecycleActions
	stamp := metav1.NewTime(now.Truncate(time.Second))
	start := stamp
	if activeSince != nil && !activeSince.After(now) {
		start = metav1.NewTime(activeSince.Truncate(time.Second))
	}
	suspended := ptr.Deref(tj.Spec.Suspend, false)

	if !finished(st) {
		switch {
		case suspended:
			// The deadline never counts while suspended; it restarts on resume.
			st.StartTime = nil
		case st.StartTime == nil:
			st.StartTime = &start
		}
	}
	if !finished(st) && !suspended && st.StartTime != nil && policy.ActiveDeadlineSeconds != nil {
		due := st.StartTime.Add(time.Duration(*policy.ActiveDeadlineSeconds) * time.Second)
		if now.Before(due) {
			out.requeueAfter = due.Sub(now)
		} else {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, ObservedGeneration: tj.Generation,
				Reason: trainer.TrainJobDeadlineExceededReason, Message: trainer.TrainJobDeadlineExceededMessage,
			})
			out.deleteJobSet = true
			out.events = append(out.events, event{kind: "Warning", reason: trainer.TrainJobDeadlineExceededReason,
				note: fmt.Sprintf("TrainJob was active for %ds, its activeDeadlineSeconds: deleting its JobSet", *policy.ActiveDeadlineSeconds)})
			orderConditions(st.Conditions)
		}
	}
	if finished(st) {
		if st.CompletionTime == nil {
			st.CompletionTime = &stamp
		}
		if policy.TTLSecondsAfterFinished != nil {
			due := st.CompletionTime.Add(time.Duration(*policy.TTLSecondsAfterFinished) * time.Second)
			if now.Before(due) {
				out.requeueAfter = due.Sub(now)
			} else {
				out.deleteTrainJob = true
				out.events = append(out.events, event{kind: "Normal", reason: ReasonTTLExpired,
					note: fmt.Sprintf("TrainJob finished %ds ago, its ttlSecondsAfterFinished: deleting it and everything it owns", *policy.TTLSecondsAfterFinished)})
			}
		}
	}
	return out
}
