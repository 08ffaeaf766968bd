package eventrecorder

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
)

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name)},
	}
}

type harness struct {
	t     *testing.T
	cs    *fake.Clientset
	clk   *clocktesting.FakeClock
	b     *Broadcaster
	start func()
}

func newHarness(t *testing.T, mutate func(*Options)) *harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cs: fake.NewClientset(), clk: clocktesting.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))}
	o := DefaultOptions()
	o.Clock, o.RetryWait = h.clk, time.Millisecond
	if mutate != nil {
		mutate(&o)
	}
	h.b = New(h.cs.EventsV1(), scheme, o)
	h.start = func() {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() { _ = h.b.Start(ctx) }()
	}
	return h
}

// events waits until namespace team holds n Events and returns them.
func (h *harness) events(n int) []eventsv1.Event {
	h.t.Helper()
	var list *eventsv1.EventList
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		list, err = h.cs.EventsV1().Events("team").List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == n, err
	})
	if err != nil {
		got := 0
		if list != nil {
			got = len(list.Items)
		}
		h.t.Fatalf("want %d Events, have %d: %v", n, got, err)
	}
	return list.Items
}

// settle waits until the queues are empty and the workers idle.
func (h *harness) settle(writes *atomic.Int32, want int32) {
	h.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return writes.Load() >= want, nil
	}); err != nil {
		h.t.Fatalf("%d writes, want %d", writes.Load(), want)
	}
}

func countWrites(cs *fake.Clientset) *atomic.Int32 {
	var n atomic.Int32
	cs.PrependReactor("*", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "create" || a.GetVerb() == "patch" {
			n.Add(1)
		}
		return false, nil, nil
	})
	return &n
}

// started is a started recorder "c" and the count of the Events' writes.
func started(t *testing.T, mutate func(*Options)) (*harness, *atomic.Int32, events.EventRecorder) {
	t.Helper()
	h := newHarness(t, mutate)
	writes := countWrites(h.cs)
	h.start()
	return h, writes, h.b.NewRecorder("c")
}

func TestRecordsAnEvent(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	h.b.NewRecorder("kiln-trainjob-controller").Eventf(pod("a"), nil, corev1.EventTypeWarning, "Failed", "Reconcile", "TrainJob failed: %s", "deadline")
	ev := h.events(1)[0]
	if ev.Reason != "Failed" || ev.Type != corev1.EventTypeWarning || ev.Action != "Reconcile" || ev.Note != "TrainJob failed: deadline" ||
		ev.Regarding.Name != "a" || ev.Regarding.Kind != "Pod" || ev.ReportingController != "kiln-trainjob-controller" || ev.ReportingInstance == "" ||
		!ev.EventTime.Time.Equal(h.clk.Now()) || ev.Series != nil {
		t.Errorf("recorded %+v", ev)
	}
}

func TestRepeatsCountOnOneEventWithinTheWindow(t *testing.T) {
	h, writes, rec := started(t, nil)
	rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Suspended", "Reconcile", "queued")
	h.settle(writes, 1)
	for range 2 {
		h.clk.Step(time.Minute)
		rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Suspended", "Reconcile", "queued")
	}
	h.settle(writes, 3)
	evs := h.events(1)
	if s := evs[0].Series; s == nil || s.Count != 3 || !s.LastObservedTime.Time.Equal(h.clk.Now()) {
		t.Errorf("series %+v, want count 3 last observed now", s)
	}
	// Past the window, the same Event starts a new one.
	h.clk.Step(7 * time.Minute)
	rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Suspended", "Reconcile", "queued")
	h.events(2)
	// Another note is another Event.
	rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Suspended", "Reconcile", "queued again")
	h.events(3)
}

func TestRemembersOnlyTheMostRecentSeries(t *testing.T) {
	h, writes, rec := started(t, func(o *Options) { o.Series = 2; o.Workers = 1 })
	for _, name := range []string{"a", "b", "c"} {
		rec.Eventf(pod(name), nil, corev1.EventTypeNormal, "Created", "Reconcile", "created")
	}
	h.settle(writes, 3)
	h.b.mu.Lock()
	n := h.b.recent.Len()
	h.b.mu.Unlock()
	if n != 2 {
		t.Errorf("%d series remembered, want the bound, 2", n)
	}
	// a's series was forgotten: its repeat is a new Event; c's counts on its own.
	rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Created", "Reconcile", "created")
	rec.Eventf(pod("c"), nil, corev1.EventTypeNormal, "Created", "Reconcile", "created")
	h.settle(writes, 5)
	h.events(4)
}

func TestARepeatOfADeletedEventStartsANewOne(t *testing.T) {
	h, writes, rec := started(t, nil)
	rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Running", "Reconcile", "running")
	first := h.events(1)[0]
	if err := h.cs.EventsV1().Events("team").Delete(context.Background(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(time.Second)
	rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Running", "Reconcile", "running")
	h.settle(writes, 3) // the patch that found nothing, then the create
	if ev := h.events(1)[0]; ev.Name == first.Name || ev.Series != nil {
		t.Errorf("after the deletion: %+v, want a new Event", ev)
	}
}

func TestDropsWhatTheQueueCannotHoldWithoutBlocking(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Queue = 1; o.Workers = 1 })
	before := testutil.ToFloat64(Events.WithLabelValues("dropped_queue_full"))
	rec := h.b.NewRecorder("c")
	done := make(chan struct{})
	go func() {
		for range 3 {
			rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Created", "Reconcile", "created")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Eventf blocked on a full queue")
	}
	if d := testutil.ToFloat64(Events.WithLabelValues("dropped_queue_full")) - before; d != 2 {
		t.Errorf("%v dropped, want 2", d)
	}
	h.start()
	h.events(1)
}

func TestRetriesWhatMayPassAndDropsWhatCannot(t *testing.T) {
	h := newHarness(t, nil)
	var calls atomic.Int32
	h.cs.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ev := a.(k8stesting.CreateAction).GetObject().(*eventsv1.Event)
		switch {
		case ev.Regarding.Name == "refused":
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, ev.Name, nil)
		case calls.Add(1) <= 2:
			return true, nil, apierrors.NewServiceUnavailable("overloaded")
		}
		return false, nil, nil
	})
	failed := testutil.ToFloat64(Events.WithLabelValues("failed"))
	h.start()
	rec := h.b.NewRecorder("c")
	rec.Eventf(pod("refused"), nil, corev1.EventTypeNormal, "Created", "Reconcile", "created")
	rec.Eventf(pod("a"), nil, corev1.EventTypeNormal, "Created", "Reconcile", "created")
	if ev := h.events(1)[0]; ev.Regarding.Name != "a" {
		t.Errorf("recorded %s's Event, want a's", ev.Regarding.Name)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return testutil.ToFloat64(Events.WithLabelValues("failed"))-failed == 1, nil
	}); err != nil {
		t.Errorf("the refused Event was not counted failed")
	}
}
