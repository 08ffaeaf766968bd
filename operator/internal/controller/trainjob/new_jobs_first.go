package trainjob

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// createPriority is the work queue priority of a TrainJob just created: behind the due
// deadlines and TTLs and the kills that follow them, ahead of the status churn of the
// jobs already running (priority 0).
const createPriority = timerPriority / 2

// newJobsFirst queues a TrainJob just created at createPriority. Its first reconcile
// creates its JobSet, which is what its user waits for; the reconciles that a running
// job's JobSet, Jobs and pods queue as they change mirror counts into its status and can
// wait. Under a burst of submissions they outnumber the new jobs two or three to one, and
// at one priority each new job waited behind the churn of the jobs submitted before it
// (docs/performance.md, "The floor of the throughput figure, measured"). The informer's
// initial list (a restart) is not a submission and keeps its low priority; the For watch
// queues every create too, at 0, and the queue keeps the higher of the two.
func newJobsFirst() handler.TypedEventHandler[client.Object, reconcile.Request] {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e ctrlevent.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			tj, ok := e.Object.(*trainer.TrainJob)
			pq, isPriority := q.(priorityqueue.PriorityQueue[reconcile.Request])
			if !ok || !isPriority || e.IsInInitialList || !tj.DeletionTimestamp.IsZero() || trainer.Finished(&tj.Status) {
				return
			}
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(createPriority)}, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tj)})
		},
	}
}
