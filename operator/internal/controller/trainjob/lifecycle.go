package trainjob

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// lifecycleActions is what the lifecycle rules ask of one reconcile.
type lifecycleActions struct {
	// deleteJobSet: the deadline passed; every pod must go (with its grace period).
	deleteJobSet bool
	// deleteTrainJob: the TTL after finishing passed. ttlExpired is its event, recorded
	// only by the reconcile that deleted the job: a reconcile of a stale copy (the cache
	// not yet showing the deletion), or one after a restart that killed the operator before
	// its delete, must not record it a second time.
	deleteTrainJob bool
	ttlExpired     *event
	// restartPods: the job stopped reporting progress for the first time (progress.go).
	restartPods bool
	// requeueAfter is the next instant a rule falls due (0: none).
	requeueAfter time.Duration
	events       []event
	// deadlineDue and ttlDue are the instants the rule that fired fell due (for its lag).
	deadlineDue, ttlDue time.Time
}

// applyLifecycle applies the deadline (deadline.go), the progress deadline (progress.go),
// then the TTL (ttl.go): a deadline that fires finishes the job, which starts its TTL. Everything is computed from the persisted
// spec and status only (no in-memory timers: a rule that fell due while the operator was
// down fires on the next reconcile). Times are whole seconds, as the API stores them, so
// that every reconcile computes the same instants.
//
// activeSince, when known, is when the job became active: Kueue's admission time for a
// queued job. Otherwise the job counts as active from now.
func applyLifecycle(tj *trainer.TrainJob, st *trainer.TrainJobStatus, policy trainer.EffectiveRunPolicy, now time.Time, activeSince *time.Time) lifecycleActions {
	var out lifecycleActions
	stamp := metav1.NewTime(now.Truncate(time.Second))
	if due, fired := applyDeadline(tj, st, policy, now, activeSince); fired != nil {
		out.deleteJobSet = true
		out.deadlineDue = st.StartTime.Add(time.Duration(*policy.ActiveDeadlineSeconds) * time.Second)
		out.events = append(out.events, *fired)
	} else {
		out.requeueAfter = due
	}
	if !out.deleteJobSet {
		due, restart, stalled := applyProgressDeadline(tj, st, now)
		switch {
		case stalled != nil:
			out.deleteJobSet = true
			out.events = append(out.events, *stalled)
		case restart:
			out.restartPods = true
		}
		if due > 0 && (out.requeueAfter == 0 || due < out.requeueAfter) {
			out.requeueAfter = due
		}
	}
	if due, expired := applyTTL(st, policy, stamp, now); expired != nil {
		out.deleteTrainJob = true
		out.ttlDue = st.CompletionTime.Add(time.Duration(*policy.TTLSecondsAfterFinished) * time.Second)
		out.ttlExpired = expired
	} else if due > 0 {
		out.requeueAfter = due
	}
	return out
}
