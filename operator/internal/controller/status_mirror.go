package controller

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// finished reports whether the TrainJob completed or failed for good. A missing runtime
// fails a TrainJob only until the runtime appears.
func finished(st *trainer.TrainJobStatus) bool {
	if meta.IsStatusConditionTrue(st.Conditions, trainer.TrainJobComplete) {
		return true
	}
	c := meta.FindStatusCondition(st.Conditions, trainer.TrainJobFailed)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason != trainer.TrainJobRuntimeNotFoundReason
}

// observe computes the TrainJob's status from its spec and JobSet (nil when there is none):
// the JobSet's counts and its Completed/Failed outcome mirrored, and the Suspended condition.
func observe(tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet) *trainer.TrainJobStatus {
	st := tj.Status.DeepCopy()
	if js != nil {
		st.JobsStatus = nil
		for _, rj := range js.Status.ReplicatedJobsStatus {
			st.JobsStatus = append(st.JobsStatus, trainer.JobStatus{
				Name:      rj.Name,
				Ready:     ptr.To(rj.Ready),
				Succeeded: ptr.To(rj.Succeeded),
				Failed:    ptr.To(rj.Failed),
				Active:    ptr.To(rj.Active),
				Suspended: ptr.To(rj.Suspended),
			})
		}
		if !finished(st) {
			for _, jsType := range []struct{ from, to string }{
				{string(jobsetv1alpha2.JobSetCompleted), trainer.TrainJobComplete},
				{string(jobsetv1alpha2.JobSetFailed), trainer.TrainJobFailed},
			} {
				if c := meta.FindStatusCondition(js.Status.Conditions, jsType.from); c != nil && c.Status == metav1.ConditionTrue {
					meta.SetStatusCondition(&st.Conditions, metav1.Condition{
						Type: jsType.to, Status: metav1.ConditionTrue, Reason: c.Reason, Message: c.Message, ObservedGeneration: tj.Generation,
					})
				}
			}
		}
	}
	suspensionCondition(tj, st)
	orderConditions(st.Conditions)
	return st
}

// runtimeAvailability fails the job while its runtime is missing (applyErr says so), and
// ends that failure once the runtime appeared: False, not removed, so that the transition
// stays visible and the status is never empty.
func runtimeAvailability(tj *trainer.TrainJob, st *trainer.TrainJobStatus, applyErr error) []event {
	if errors.Is(applyErr, errRuntimeNotFound) {
		msg := fmt.Sprintf("%s %q not found: create it, or point spec.runtimeRef at an existing runtime", runtimeKind(tj), tj.Spec.RuntimeRef.Name)
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: trainer.TrainJobRuntimeNotFoundReason, ObservedGeneration: tj.Generation, Message: msg,
		})
		return []event{{corev1.EventTypeWarning, ReasonRuntimeNotFound, msg}}
	}
	if c := meta.FindStatusCondition(st.Conditions, trainer.TrainJobFailed); c != nil && c.Reason == trainer.TrainJobRuntimeNotFoundReason && applyErr == nil {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: trainer.TrainJobFailed, Status: metav1.ConditionFalse, Reason: trainer.TrainJobRuntimeFoundReason, ObservedGeneration: tj.Generation,
			Message: fmt.Sprintf("%s %q found", runtimeKind(tj), tj.Spec.RuntimeRef.Name),
		})
	}
	return nil
}

// orderConditions keeps the conditions that are False first and True last, so the State
// column (the last condition's type) names what holds now: a resumed job does not print
// "Suspended", a completed one prints "Complete".
func orderConditions(conds []metav1.Condition) {
	var falses, trues []metav1.Condition
	for _, c := range conds {
		if c.Status == metav1.ConditionTrue {
			trues = append(trues, c)
		} else {
			falses = append(falses, c)
		}
	}
	copy(conds, append(falses, trues...))
}
