package trainjob

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/controller"
)

// Suspension: a suspended TrainJob's JobSet is suspended (jobset_apply.go), its
// Suspended condition is True/Suspended, and on resume False/Resumed. Its deadline never
// counts while it is suspended, and on resume it counts from when the job became active
// again: Kueue's admission for a queued job, else the resume itself.

// suspensionCondition sets the Suspended condition of an unfinished job from its spec.
func suspensionCondition(tj *trainer.TrainJob, st *trainer.TrainJobStatus) {
	switch {
	case trainer.Finished(st):
		// A finished TrainJob keeps the Suspended condition it had.
	case ptr.Deref(tj.Spec.Suspend, false):
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: trainer.TrainJobSuspended, Status: metav1.ConditionTrue,
			Reason: trainer.TrainJobSuspendedReason, Message: trainer.TrainJobSuspendedMessage, ObservedGeneration: tj.Generation,
		})
	case meta.IsStatusConditionTrue(st.Conditions, trainer.TrainJobSuspended):
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse,
			Reason: trainer.TrainJobResumedReason, Message: trainer.TrainJobResumedMessage, ObservedGeneration: tj.Generation,
		})
	}
}

// activeSince is when a running job that has no startTime yet became active, nil when
// that is unknown (it then counts from now) or the job is not running. js is the job's own
// JobSet, nil when it has none.
func (r *Reconciler) activeSince(ctx context.Context, tj *trainer.TrainJob, st *trainer.TrainJobStatus, js *jobsetv1alpha2.JobSet) *time.Time {
	if st.StartTime != nil || ptr.Deref(tj.Spec.Suspend, false) || trainer.Finished(st) {
		return nil
	}
	resumed := controller.UnsuspendedAt(tj, r.clock.Now())
	if resumed == nil && tj.Spec.Suspend == nil && js != nil && !js.CreationTimestamp.IsZero() {
		// Never suspended: active since its JobSet was created, whenever the status that
		// says so is written (the reconcile that creates the JobSet leaves it to the next,
		// jobSetCreatedFirst).
		resumed = ptr.To(js.CreationTimestamp.Time)
	}
	return activeFrom(r.admissionTime(ctx, tj), resumed)
}

// activeFrom is when a job became active: once Kueue admitted it (nil: not queued, or
// unknown) and spec.suspend was last set to false (nil: unknown), whichever came later.
// Kueue unsuspends a job it admitted within moments, unless its TrainJob reconciler has a
// backlog: then a deadline counted from the admission could fire before any of the job's
// pods existed (docs/reliability.md, "Chaos").
func activeFrom(admitted, resumed *time.Time) *time.Time {
	if admitted == nil || (resumed != nil && resumed.After(*admitted)) {
		return resumed
	}
	return admitted
}

// admissionTime is when Kueue admitted a queued TrainJob (its Workload's Admitted
// transition), so that a job's deadline counts from its admission even when the operator
// saw the admission late or never saw the job suspended. Nil when the job is not queued,
// not admitted, or Kueue is not installed.
func (r *Reconciler) admissionTime(ctx context.Context, tj *trainer.TrainJob) *time.Time {
	if tj.Labels[trainer.KueueQueueNameLabel] == "" {
		return nil
	}
	list := &kueuev1beta2.WorkloadList{}
	if err := r.client.List(ctx, list, client.InNamespace(tj.Namespace), client.MatchingLabels{trainer.KueueJobUIDLabel: string(tj.UID)}); err != nil {
		if !meta.IsNoMatchError(err) {
			klog.FromContext(ctx).V(2).Info("Could not read the TrainJob's Kueue Workload; counting from now", "err", err)
		}
		return nil
	}
	return kueue.LatestAdmission(list.Items)
}
