package controller

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// restartTimerHorizon bounds the timers timersFirst sets: by then, the first reconcile of
// every job after a restart has long been done, and each job's own requeue wakes it.
const restartTimerHorizon = 5 * time.Minute

// timersFirst keeps the deadlines and TTLs on time when the operator starts. The
// informer's initial list queues every TrainJob below everything else, and until a job's
// first reconcile nothing wakes it at its due instant: a chaos run saw deadlines act 25 to
// 70 s late and a TTL 13 s late after restarts, behind the first reconcile (a JobSet apply)
// of a thousand running jobs on a loaded platform. So a job whose deadline or TTL, by what
// the TrainJob itself says, is due is queued at timerPriority now, and one due within
// restartTimerHorizon at its due instant, whether or not its first reconcile ran by then.
// A deadline or TTL that only the runtime sets is not known here; its job keeps its place.
func timersFirst(clk clock.PassiveClock) handler.TypedEventHandler[client.Object, reconcile.Request] {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e ctrlevent.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			tj, ok := e.Object.(*trainer.TrainJob)
			pq, isPriority := q.(priorityqueue.PriorityQueue[reconcile.Request])
			if !ok || !isPriority || !e.IsInInitialList {
				return
			}
			now := clk.Now()
			due, known := timerDue(tj, now)
			if !known {
				return
			}
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tj)}
			add := func() { pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(timerPriority)}, req) }
			switch wait := due.Sub(now); {
			case wait <= 0:
				add()
			case wait <= restartTimerHorizon:
				// Not AddOpts.After: the queue would merge it with the job's pending first
				// reconcile into one reconcile now.
				time.AfterFunc(wait, add)
			}
		},
	}
}

// timerDue is when the TrainJob's own deadline or TTL falls due, by its spec and status
// (a running job without a startTime yet: from when spec.suspend was last written, at or
// after its resume), and whether that is known. A finished job without a TTL of its own
// is due now: its runtime may give it one, and a finished job's reconcile writes nothing else.
func timerDue(tj *trainer.TrainJob, now time.Time) (time.Time, bool) {
	st := &tj.Status
	if !tj.DeletionTimestamp.IsZero() {
		return time.Time{}, false
	}
	if finished(st) {
		ttl := tj.Spec.TTLSecondsAfterFinished
		switch {
		case st.CompletionTime == nil:
			return time.Time{}, false
		case ttl == nil:
			return now, true
		}
		return st.CompletionTime.Add(time.Duration(*ttl) * time.Second), true
	}
	ads := tj.Spec.ActiveDeadlineSeconds
	if ads == nil || ptr.Deref(tj.Spec.Suspend, false) {
		return time.Time{}, false
	}
	start := unsuspendedAt(tj, now)
	if st.StartTime != nil {
		start = &st.StartTime.Time
	}
	if start == nil {
		return time.Time{}, false
	}
	return start.Add(time.Duration(*ads) * time.Second), true
}
