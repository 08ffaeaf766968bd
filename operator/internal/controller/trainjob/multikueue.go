package trainjob

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// MultiKueue: on a manager cluster, a TrainJob whose spec.managedBy is
// kueue.x-k8s.io/multikueue runs on a worker cluster. Kueue's MultiKueue creates a copy
// there, where that cluster's Kiln runs it with its whole lifecycle (the deadline counts
// from the worker's admission), mirrors the copy's status back to the manager's TrainJob,
// and deletes the copy once the manager's Workload finishes. Kiln renders nothing for such
// a job on the manager, but owns what the mirror cannot carry:
//   - status.startTime and completionTime: Kueue v0.19 copies the status with Trainer
//     v2.2.1's Go types, which drop them; they are the worker's Resumed and Complete/Failed
//     transitions, which it does copy.
//   - the TTL after that completion: Kueue drops ttlSecondsAfterFinished from the worker's
//     copy, and the manager's TrainJob is the one users see and delete.
//   - the counts of a job no worker holds: after its worker is lost Kueue evicts the job to
//     dispatch it again, and waits for its jobsStatus to show no active pods before it
//     releases the quota; nothing mirrors that from a lost worker (kueue#15380).
//
// On a worker, the copy (labelled kueue.x-k8s.io/multikueue-origin) never applies a TTL of
// its runtime: MultiKueue deletes it once the manager saw it finish, and deleting it before
// that would make MultiKueue create it again.

// reconcileDispatched writes what the manager's Kiln owns of a TrainJob that MultiKueue
// dispatches, and applies its TTL.
func (r *Reconciler) reconcileDispatched(ctx context.Context, tj *trainer.TrainJob) (reconcile.Result, error) {
	workloads := r.workloads(ctx, tj)
	st := dispatchedStatus(tj, kueue.WorkerCluster(workloads), kueue.LatestAdmission(workloads))
	// The events of what this reconcile changes (Kueue's mirror writes the rest).
	evs := transitions(tj, st)
	if why, lost := workerLost(workloads); lost && staleCounts(&tj.Status, st) {
		evs = append(evs, event{kind: corev1.EventTypeWarning, reason: ReasonWorkerLost, note: "Kueue evicted the job from its worker cluster (" + why + "), whose pods its status still counted: " +
			"Kiln set them to 0, so that Kueue releases its quota and dispatches it again"})
	}
	policy, err := r.runPolicy(ctx, tj)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := r.clock.Now()
	wait, expired := applyTTL(st, policy, metav1.NewTime(now.Truncate(time.Second)), now)
	if !equality.Semantic.DeepEqual(st, &tj.Status) {
		orig := tj.DeepCopy()
		tj.Status = *st
		// Kueue mirrors the worker's status into this job at any moment: a write based on
		// an older copy would undo its latest mirror.
		if err := r.client.Status().Patch(ctx, tj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, fmt.Errorf("writing the status of a dispatched TrainJob: %w", err)
		}
		r.record(tj, evs)
	}
	if expired != nil {
		deleted, err := r.deleteExpired(ctx, tj)
		if deleted {
			due := st.CompletionTime.Add(time.Duration(*policy.TTLSecondsAfterFinished) * time.Second)
			observeTTLDeletion(tj, lifecycleActions{deleteTrainJob: true, ttlExpired: expired, ttlDue: due}, now)
			r.record(tj, []event{*expired})
		}
		return reconcile.Result{}, err
	}
	if wait > 0 {
		return reconcile.Result{RequeueAfter: wait, Priority: ptr.To(timerPriority)}, nil
	}
	return reconcile.Result{}, nil
}

// workloads are the job's Kueue Workloads (one, but for moments when Kueue replaces it).
func (r *Reconciler) workloads(ctx context.Context, tj *trainer.TrainJob) []kueuev1beta2.Workload {
	list := &kueuev1beta2.WorkloadList{}
	if err := r.client.List(ctx, list, client.InNamespace(tj.Namespace), client.MatchingLabels{trainer.KueueJobUIDLabel: string(tj.UID)}); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not read the TrainJob's Kueue Workload", "err", err)
		return nil
	}
	return list.Items
}

// staleCounts reports whether the new status drops counts of active pods that the mirror
// left from a worker that no longer holds the job.
func staleCounts(before, after *trainer.TrainJobStatus) bool {
	for i := range before.JobsStatus {
		if ptr.Deref(before.JobsStatus[i].Active, 0) > 0 && i < len(after.JobsStatus) && ptr.Deref(after.JobsStatus[i].Active, 0) == 0 {
			return true
		}
	}
	return false
}

// workerLost reports whether Kueue evicted the job by its MultiKueue admission check (the
// worker holding it was lost), and Kueue's message. A job suspended or preempted on the
// manager is evicted for other reasons; its copy on a worker that answers is stopped there.
func workerLost(workloads []kueuev1beta2.Workload) (string, bool) {
	for i := range workloads {
		c := meta.FindStatusCondition(workloads[i].Status.Conditions, kueuev1beta2.WorkloadEvicted)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason == kueuev1beta2.WorkloadEvictedByAdmissionCheck {
			return c.Message, true
		}
	}
	return "", false
}

// dispatchedStatus is the status of a TrainJob that MultiKueue dispatches, given the worker
// cluster holding it ("" when none does) and when its Workload was last admitted (nil when
// it is not): the mirrored status, with the times it lacks.
func dispatchedStatus(tj *trainer.TrainJob, cluster string, admitted *time.Time) *trainer.TrainJobStatus {
	st := tj.Status.DeepCopy()
	if cluster == "" && !trainer.Finished(st) {
		// Queued on the manager, or evicted from a worker to be dispatched again: nothing of
		// it runs anywhere Kueue can see.
		suspensionCondition(tj, st)
		for i := range st.JobsStatus {
			st.JobsStatus[i].Active, st.JobsStatus[i].Ready = ptr.To[int32](0), ptr.To[int32](0)
		}
	}
	suspended := ptr.Deref(tj.Spec.Suspend, false)
	switch c := meta.FindStatusCondition(st.Conditions, trainer.TrainJobSuspended); {
	case !trainer.Finished(st) && (suspended || cluster == ""):
		st.StartTime = nil
	case st.StartTime == nil && c != nil && c.Status == metav1.ConditionFalse:
		st.StartTime = ptr.To(c.LastTransitionTime)
	case st.StartTime == nil && c == nil && admitted != nil:
		// The worker's copy shows no suspension to have been resumed from: its Kiln saw it
		// running from the first (its Kueue resumed it before Kiln wrote Suspended), or its
		// controller records none. It started when a worker admitted it, which is when the
		// manager's Workload was admitted (MultiKueue's check turns Ready then), and not
		// after it finished.
		st.StartTime = ptr.To(metav1.NewTime(*admitted))
	}
	if trainer.Finished(st) && st.CompletionTime == nil {
		st.CompletionTime = finishTime(st)
	}
	if st.StartTime != nil && st.CompletionTime != nil && st.StartTime.After(st.CompletionTime.Time) {
		st.StartTime = st.CompletionTime.DeepCopy()
	}
	return st
}

// finishTime is when a finished job's Complete or Failed condition turned True.
func finishTime(st *trainer.TrainJobStatus) *metav1.Time {
	var at *metav1.Time
	for _, t := range []string{trainer.TrainJobComplete, trainer.TrainJobFailed} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil && c.Status == metav1.ConditionTrue && (at == nil || c.LastTransitionTime.Before(at)) {
			at = ptr.To(c.LastTransitionTime)
		}
	}
	return at
}

// dispatchedCopy reports whether the TrainJob is the copy a MultiKueue manager created on
// this (worker) cluster.
func dispatchedCopy(tj *trainer.TrainJob) bool {
	_, ok := tj.Labels[trainer.KueueMultiKueueOriginLabel]
	return ok
}

// ttlOwnedElsewhere drops the TTL of a worker's copy of a dispatched job (see above).
func ttlOwnedElsewhere(tj *trainer.TrainJob, policy trainer.EffectiveRunPolicy) trainer.EffectiveRunPolicy {
	if dispatchedCopy(tj) {
		policy.TTLSecondsAfterFinished = nil
	}
	return policy
}
