package trainjob

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// A TrainJob just created is reconciled before the churn queued ahead of it, after the due
// timers; the initial list of a restart, a finished job and one being deleted keep their place.
func TestNewJobsFirst(t *testing.T) {
	ctx := context.Background()
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	job := func(name string) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: name}}
	}
	finishedJob := job("finished")
	finishedJob.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue}}
	deleting := job("deleting")
	deleting.DeletionTimestamp = new(metav1.Now())
	deleting.Finalizers = []string{"x"}

	// Churn queued first, at the default priority; then a due timer.
	q.Add(req("running"))
	q.AddWithOpts(priorityqueue.AddOpts{Priority: new(timerPriority)}, req("due"))
	h := newJobsFirst()
	for _, e := range []ctrlevent.TypedCreateEvent[client.Object]{
		{Object: job("listed"), IsInInitialList: true},
		{Object: finishedJob},
		{Object: deleting},
		{Object: job("new")},
	} {
		h.Create(ctx, e, q)
	}
	// The queue takes its adds in the background: all three are in once it holds three.
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return q.Len() == 3, nil
	}); err != nil {
		t.Fatalf("the queue holds %d items, want 3", q.Len())
	}
	var got []reconcile.Request
	var priorities []int
	for q.Len() > 0 {
		item, priority, _ := q.GetWithPriority()
		got = append(got, item)
		priorities = append(priorities, priority)
		q.Done(item)
	}
	want := []reconcile.Request{req("due"), req("new"), req("running")}
	if len(got) != len(want) {
		t.Fatalf("queued %v (priorities %v), want %v", got, priorities, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("queued %v (priorities %v), want %v", got, priorities, want)
		}
	}
	if priorities[1] != createPriority {
		t.Fatalf("the new job's priority is %d, want %d", priorities[1], createPriority)
	}
}
