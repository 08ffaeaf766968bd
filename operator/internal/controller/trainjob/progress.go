package trainjob

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// The progress deadline (kiln.dev/progress-deadline): a running job that has reported
// progress (status.trainerStatus) and then reports nothing for that long has stalled. The
// first stall restarts all its pods (a restart with reason ProgressStalled, not counted
// against the runtime's maxRestarts); a stall after that fails the job with
// ProgressDeadlineExceeded and deletes its JobSet, as the active deadline does. The silence
// is measured from the latest of the last report, the job's start (status.startTime, which
// a suspension clears and a resume or an admission sets again: time queued or suspended
// never counts) and the last restart of its pods (trainer.LastSignOfLife). A job that never
// reported is never judged.

// ProgressDeadline returns a TrainJob's progress deadline: 0 when it has none, an error
// when its annotation is not a positive duration.
func ProgressDeadline(tj *trainer.TrainJob) (time.Duration, error) {
	v, ok := tj.Annotations[kiln.AnnotationProgressDeadline]
	if !ok {
		return 0, nil
	}
	d, err := kiln.ParseProgressDeadline(v)
	if err != nil {
		return 0, fmt.Errorf("annotation %s: %w", kiln.AnnotationProgressDeadline, err)
	}
	return d, nil
}

// applyProgressDeadline judges a running job's silence. It returns how long until the
// deadline (0: none pending), whether to restart the job's pods now, and the event of a
// stall.
func applyProgressDeadline(tj *trainer.TrainJob, st *trainer.TrainJobStatus, now time.Time) (time.Duration, bool, *event) {
	deadline, err := ProgressDeadline(tj)
	if err != nil || deadline == 0 || trainer.Finished(st) || ptr.Deref(tj.Spec.Suspend, false) {
		return 0, false, nil
	}
	last := trainer.LastSignOfLife(&trainer.TrainJob{Spec: tj.Spec, Status: *st})
	if last == nil {
		return 0, false, nil
	}
	due := last.Add(deadline)
	if now.Before(due) {
		return due.Sub(now), false, nil
	}
	silent := now.Sub(st.TrainerStatus.LastUpdatedTime.Time).Truncate(time.Second)
	stamp := metav1.NewTime(now.Truncate(time.Second))
	if st.Restarts == nil || st.Restarts.ProgressStalls == 0 {
		rs := &trainer.RestartsStatus{}
		if st.Restarts != nil {
			rs = st.Restarts.DeepCopy()
		}
		rs.Count++
		rs.ProgressStalls++
		rs.LastReason = trainer.TrainJobProgressStalledReason
		rs.LastMessage = fmt.Sprintf("no progress reported for %s (its %s is %s): restarting all its pods once; a second stall fails the job",
			silent, kiln.AnnotationProgressDeadline, deadline)
		rs.LastRestartTime = &stamp
		st.Restarts = rs
		return deadline, true, nil
	}
	msg := fmt.Sprintf("TrainJob reported no progress for %s (its %s is %s), again after its pods were restarted for the same reason: failed, deleting its JobSet",
		silent, kiln.AnnotationProgressDeadline, deadline)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, ObservedGeneration: tj.Generation,
		Reason: trainer.TrainJobProgressDeadlineExceededReason, Message: msg,
	})
	orderConditions(st.Conditions)
	return 0, false, &event{kind: corev1.EventTypeWarning, reason: trainer.TrainJobProgressDeadlineExceededReason, note: msg}
}

// restartPods deletes the Jobs of the job's JobSet (and, foreground, their pods first): JobSet
// creates them again, at the same restart attempt, once they are gone.
func (r *Reconciler) restartPods(ctx context.Context, js *jobsetv1alpha2.JobSet) error {
	if js == nil || !js.DeletionTimestamp.IsZero() {
		return nil
	}
	start := time.Now()
	err := r.client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(js.Namespace),
		client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: js.Name, jobsetv1alpha2.JobSetUIDKey: string(js.UID)}, client.PropagationPolicy(metav1.DeletePropagationForeground))
	traceStep(ctx, "restart pods", start, err)
	if err != nil {
		return fmt.Errorf("restarting the pods of a TrainJob that stopped reporting progress: %w", err)
	}
	return nil
}
