package trainjob

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Event reasons.
const (
	ReasonCreated         = "Created"
	ReasonSuspended       = "Suspended"
	ReasonResumed         = "Resumed"
	ReasonRunning         = "Running"
	ReasonCompleted       = "Completed"
	ReasonFailed          = "Failed"
	ReasonRuntimeNotFound = "RuntimeNotFound"
	ReasonRenderFailed    = "RenderFailed"
	ReasonTTLExpired      = "TTLExpired"
	ReasonJobSetRetrying  = "JobSetRetrying"
	// ReasonPodGroupUnavailable: the runtime asks for gang scheduling and the cluster serves
	// no PodGroup of its kind.
	ReasonPodGroupUnavailable = "PodGroupUnavailable"
	ReasonRestarted           = "Restarted"
	// ReasonWorkerLost: MultiKueue evicted a job from a worker cluster it lost (multikueue.go).
	ReasonWorkerLost = "WorkerLost"
)

// event is recorded once the status write that it describes succeeded.
type event struct {
	kind, reason, note string
}

// record records the events of a reconcile whose status write succeeded.
func (r *Reconciler) record(tj *trainer.TrainJob, evs []event) {
	for _, e := range evs {
		r.recorder.Eventf(tj, nil, e.kind, e.reason, "Reconcile", "%s", e.note)
	}
}

// ownEvents are the failures that record their own event, saying what to do about them.
var ownEvents = []string{trainer.TrainJobRuntimeNotFoundReason, trainer.TrainJobDeadlineExceededReason, trainer.TrainJobJobSetRejectedReason, trainer.TrainJobProgressDeadlineExceededReason}

// transitions are the events a status change of tj deserves. A job in a Kueue queue gets
// no Suspended or Resumed: Kueue records its queueing, admission and eviction on the
// TrainJob itself (CreatedWorkload, Started "Admitted by clusterQueue ...", Stopped, with
// the reason), and the same news twice is a write per transition for nothing.
func transitions(tj *trainer.TrainJob, after *trainer.TrainJobStatus) []event {
	before := &tj.Status
	kueueTells := tj.Labels[trainer.KueueQueueNameLabel] != ""
	var evs []event
	turned := func(t string, s metav1.ConditionStatus, reason string) *metav1.Condition {
		a := meta.FindStatusCondition(after.Conditions, t)
		if a == nil || a.Status != s || (reason != "" && a.Reason != reason) {
			return nil
		}
		b := meta.FindStatusCondition(before.Conditions, t)
		if b != nil && b.Status == a.Status && b.Reason == a.Reason {
			return nil
		}
		return a
	}
	if c := turned(trainer.TrainJobSuspended, metav1.ConditionTrue, ""); c != nil && !kueueTells {
		evs = append(evs, event{corev1.EventTypeNormal, ReasonSuspended, c.Message})
	}
	if c := turned(trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason); c != nil && !kueueTells {
		evs = append(evs, event{corev1.EventTypeNormal, ReasonResumed, c.Message})
	}
	if podsReady(after) && !podsReady(before) && !trainer.Finished(after) {
		evs = append(evs, event{corev1.EventTypeNormal, ReasonRunning, "TrainJob running: its pods are ready"})
	}
	if c := turned(trainer.TrainJobComplete, metav1.ConditionTrue, ""); c != nil {
		evs = append(evs, event{corev1.EventTypeNormal, ReasonCompleted, "TrainJob completed: " + c.Message})
	}
	if c := turned(trainer.TrainJobFailed, metav1.ConditionTrue, ""); c != nil && !slices.Contains(ownEvents, c.Reason) {
		evs = append(evs, event{corev1.EventTypeWarning, ReasonFailed, "TrainJob failed: " + c.Message})
	}
	if e := restarted(before.Restarts, after.Restarts); e != nil {
		evs = append(evs, *e)
	}
	return evs
}

// restarted is the event of a new restart of the job's pods, with its reason and how much
// of the failure budget is left.
func restarted(before, after *trainer.RestartsStatus) *event {
	if after == nil || after.Count == 0 || (before != nil && before.Count >= after.Count) {
		return nil
	}
	var counted int32
	if before != nil {
		counted = before.CountedTowardsMax
	}
	budget := "not counted against maxRestarts"
	if after.CountedTowardsMax > counted {
		budget = "counted against maxRestarts"
	}
	return &event{corev1.EventTypeWarning, ReasonRestarted, fmt.Sprintf("restarting all pods (restart %d; %s, %d of %d used): %s: %s",
		after.Count, budget, after.CountedTowardsMax, after.MaxRestarts, after.LastReason, after.LastMessage)}
}

// podsReady says whether any of the job's pods is ready (or done): the job runs.
func podsReady(st *trainer.TrainJobStatus) bool {
	for _, js := range st.JobsStatus {
		if ptr.Deref(js.Ready, 0)+ptr.Deref(js.Succeeded, 0) > 0 {
			return true
		}
	}
	return false
}
