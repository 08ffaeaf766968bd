package trainjob

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
	"github.com/kiln-ml/kiln/operator/internal/controller"
)

// restartTimerHorizon bounds the timers timersFirst sets: by then, the first reconcile of
// every job after a restart has long been done, and each job's own requeue wakes it.
const restartTimerHorizon = 5 * time.Minute

// timersFirst keeps the deadlines and TTLs on time when the operator starts. The
// informer's initial list queues every TrainJob below everything else, and until a job's
// first reconcile nothing wakes it at its due instant, behind the first reconcile (a JobSet
// apply) of every running job (docs/reliability.md, "Chaos"). So a job whose deadline or TTL, by what
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

// timerDue is when the TrainJob's own lifecycle rules (its deadline, TTL and progress
// deadline, with only the policy its spec sets) next fall due, by the rules the reconcile
// applies (applyLifecycle, on a copy of the status), and whether anything is due. A
// finished job without a TTL of its own is due now: its runtime may give it one, and a
// finished job's reconcile writes nothing else.
func timerDue(tj *trainer.TrainJob, now time.Time) (time.Time, bool) {
	if !tj.DeletionTimestamp.IsZero() {
		return time.Time{}, false
	}
	st := tj.Status.DeepCopy()
	policy := trainer.ResolveRunPolicy(&tj.Spec, nil)
	if trainer.Finished(st) && policy.TTLSecondsAfterFinished == nil {
		return now, true
	}
	acts := applyLifecycle(tj, st, policy, now, controller.UnsuspendedAt(tj, now))
	switch {
	case acts.deleteTrainJob:
		return acts.ttlDue, true
	case acts.deleteJobSet && !acts.deadlineDue.IsZero():
		return acts.deadlineDue, true
	case acts.deleteJobSet, acts.restartPods:
		return now, true
	case acts.requeueAfter > 0:
		return now.Add(acts.requeueAfter), true
	}
	return time.Time{}, false
}
