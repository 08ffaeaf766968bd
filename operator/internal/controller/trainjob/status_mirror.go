package trainjob

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

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
		st.Restarts = observeRestarts(st.Restarts, js)
		if !trainer.Finished(st) {
			for _, jsType := range []struct{ from, to string }{
				{string(jobsetv1alpha2.JobSetCompleted), trainer.TrainJobComplete},
				{string(jobsetv1alpha2.JobSetFailed), trainer.TrainJobFailed},
			} {
				if c := meta.FindStatusCondition(js.Status.Conditions, jsType.from); c != nil && c.Status == metav1.ConditionTrue {
					meta.SetStatusCondition(&st.Conditions, metav1.Condition{
						Type: jsType.to, Status: metav1.ConditionTrue, Reason: c.Reason, Message: failureMessage(c, st.Restarts), ObservedGeneration: tj.Generation,
					})
				}
			}
		}
	}
	suspensionCondition(tj, st)
	orderConditions(st.Conditions)
	return st
}

// Reasons of a restart and of a failure of the JobSet's failure policy (JobSet's own words).
const (
	// RestartReasonFailure is a restart that no rule of the failure policy matched: a crash,
	// counted against maxRestarts.
	RestartReasonFailure = "Failure"
	// RestartReasonUncounted is a restart that a rule not counting against maxRestarts made,
	// when which one is not known.
	RestartReasonUncounted = "Uncounted"
	// ReasonReachedMaxRestarts fails a job that failed again after maxRestarts counted restarts.
	ReasonReachedMaxRestarts = "ReachedMaxRestarts"
	// ReasonFailJobSet fails a job at once: a rule FailJobSet matched (a non-retriable failure).
	ReasonFailJobSet = "FailJobSetFailurePolicyAction"

	jobSetRuleReasonPrefix    = "FailurePolicy_"
	jobSetDefaultPolicyReason = "DefaultFailurePolicy"
)

// observeRestarts mirrors the JobSet's restart counters, and while it is restarting, the
// failure policy rule that restarted it. prev is the TrainJob's stored status: the reason
// of an earlier restart stays until the next one.
func observeRestarts(prev *trainer.RestartsStatus, js *jobsetv1alpha2.JobSet) *trainer.RestartsStatus {
	fp := js.Spec.FailurePolicy
	if fp == nil && js.Status.Restarts == 0 {
		return prev
	}
	// Restarts Kiln made itself (progress.go) are not JobSet's: they add to its count.
	var stalls int32
	if prev != nil {
		stalls = prev.ProgressStalls
	}
	out := &trainer.RestartsStatus{Count: js.Status.Restarts + stalls, CountedTowardsMax: js.Status.RestartsCountTowardsMax, ProgressStalls: stalls}
	var rules []jobsetv1alpha2.FailurePolicyRule
	if fp != nil {
		out.MaxRestarts, rules = fp.MaxRestarts, fp.Rules
	}
	if prev != nil && prev.Count == out.Count {
		out.LastReason, out.LastMessage, out.LastRestartTime = prev.LastReason, prev.LastMessage, prev.LastRestartTime
		return out
	}
	if out.Count == 0 {
		return out
	}
	// A new restart: JobSet says why in its RestartingJobSet condition, True until the new
	// pods are ready.
	if c := meta.FindStatusCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetRestarting)); c != nil && c.Status == metav1.ConditionTrue {
		out.LastReason, out.LastMessage, out.LastRestartTime = RestartReasonFailure, c.Message, c.LastTransitionTime.DeepCopy()
		if rule, ok := strings.CutPrefix(c.Reason, jobSetRuleReasonPrefix); ok {
			out.LastReason = rule
		}
		return out
	}
	// Seen only once the new pods were ready (a busy operator): the counters tell a counted
	// restart (a failure) from an uncounted one, whose rule is the runtime's only rule that
	// does not count, if it has just one.
	var prevCounted int32
	if prev != nil {
		prevCounted = prev.CountedTowardsMax
	}
	out.LastReason = RestartReasonFailure
	if out.CountedTowardsMax == prevCounted {
		out.LastReason = RestartReasonUncounted
		var uncounted []string
		for _, r := range rules {
			if r.Action == jobsetv1alpha2.RestartJobSetAndIgnoreMaxRestarts {
				uncounted = append(uncounted, r.Name)
			}
		}
		if len(uncounted) == 1 {
			out.LastReason = uncounted[0]
		}
	}
	out.LastMessage = fmt.Sprintf("restart %d, seen after the new pods started (JobSet's reason for it was gone)", out.Count)
	return out
}

// failureMessage is the message of the JobSet's Failed condition c, saying what a failure
// of its failure policy means for the job.
func failureMessage(c *metav1.Condition, rs *trainer.RestartsStatus) string {
	switch {
	case c.Reason == ReasonReachedMaxRestarts && rs != nil:
		return fmt.Sprintf("failed again after %d restarts counted against its runtime's failurePolicy.maxRestarts (%d), so it is not restarted: %s",
			rs.CountedTowardsMax, rs.MaxRestarts, c.Message)
	case c.Reason == ReasonFailJobSet:
		return "failed with a failure its runtime's failure policy does not retry (a FailJobSet rule, e.g. a non-retriable exit code): " + c.Message
	}
	return c.Message
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
