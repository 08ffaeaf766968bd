// Package eventrecorder records the operator's Events (events.k8s.io/v1) in bounded memory.
//
// It replaces client-go's events broadcaster, which keeps a copy of every Event for six
// minutes to merge repeats that a job's Events almost never have (BenchmarkRetainedHeap
// guards the difference; docs/performance.md, "Events in bounded memory", has its figures).
// This recorder keeps what a series needs (the name of the Event and its count) for the most
// recent distinct events only, queues at most a bounded number of Events to write, drops
// (and counts) what does not fit rather than blocking a reconcile, and writes each object's
// Events in the order they were recorded.
package eventrecorder

import (
	"container/list"
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Options bound the recorder.
type Options struct {
	// Workers write Events concurrently; an object's Events always go to the same one.
	Workers int
	// Queue is how many Events may wait to be written, all workers together.
	Queue int
	// Series is how many distinct recent Events are remembered to merge their repeats.
	Series int
	// SeriesWindow is how long after its last occurrence a repeat still joins the series
	// (client-go's: 6 minutes).
	SeriesWindow time.Duration
	// Retries is how many times a write that failed for a reason that may pass (the
	// apiserver unreachable, overloaded) is tried again, RetryWait apart.
	Retries   int
	RetryWait time.Duration
	// Clock stamps the Events.
	Clock clock.Clock
}

// DefaultOptions bound the recorder to about a megabyte.
func DefaultOptions() Options {
	return Options{Workers: 4, Queue: 1000, Series: 512, SeriesWindow: 6 * time.Minute, Retries: 5, RetryWait: 2 * time.Second, Clock: clock.RealClock{}}
}

// Broadcaster writes the Events of every recorder it made, once started.
type Broadcaster struct {
	sink   eventsv1client.EventsGetter
	scheme *runtime.Scheme
	o      Options
	queues []chan *eventsv1.Event

	mu     sync.Mutex
	series map[seriesKey]*list.Element
	recent *list.List // of *seriesEntry, most recent first
}

// Events counts the Events recorded, by outcome: created, series (a repeat counted on the
// Event of its series), dropped_queue_full, failed (refused, or still failing after the
// retries).
var Events = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "kiln_operator_events_total",
	Help: "Events the operator recorded, by outcome: created, series (a repeat counted on an existing Event), dropped_queue_full, failed.",
}, []string{"outcome"})

func init() {
	metrics.Registry.MustRegister(Events)
}

// seriesKey is what makes two Events the same occurrence (client-go's isomorphic key).
type seriesKey struct {
	eventType, action, reason, note, controller, instance string
	regarding, related                                    corev1.ObjectReference
}

// seriesEntry is a series' Event (its name; its namespace is the key's) and its count.
type seriesEntry struct {
	key   seriesKey
	name  string
	count int32
	last  time.Time
}

// New is a Broadcaster writing through sink.
func New(sink eventsv1client.EventsGetter, scheme *runtime.Scheme, o Options) *Broadcaster {
	if o.Workers < 1 {
		o.Workers = 1
	}
	b := &Broadcaster{sink: sink, scheme: scheme, o: o, series: map[seriesKey]*list.Element{}, recent: list.New()}
	for range o.Workers {
		b.queues = append(b.queues, make(chan *eventsv1.Event, max(o.Queue/o.Workers, 1)))
	}
	return b
}

// Start writes Events until ctx ends (a manager Runnable).
func (b *Broadcaster) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, q := range b.queues {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-q:
					b.write(ctx, ev)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// NeedLeaderElection is false: a standby records nothing, and the leader's Events are
// written however leadership changes.
func (b *Broadcaster) NeedLeaderElection() bool { return false }

// NewRecorder is a recorder of Events reported by controller.
func (b *Broadcaster) NewRecorder(controller string) events.EventRecorder {
	host, _ := os.Hostname()
	return &recorder{b: b, controller: controller, instance: controller + "-" + host}
}

type recorder struct {
	b                    *Broadcaster
	controller, instance string
}

// Eventf queues an Event about regarding; it never blocks.
func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	logger := log.Log.WithName("events")
	ref, err := reference.GetReference(r.b.scheme, regarding)
	if err != nil {
		logger.Error(err, "Could not reference the object of an Event; not recorded", "reason", reason)
		return
	}
	var relRef *corev1.ObjectReference
	if related != nil {
		if relRef, err = reference.GetReference(r.b.scheme, related); err != nil {
			relRef = nil
		}
	}
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		logger.Error(nil, "Unsupported Event type; not recorded", "type", eventtype, "reason", reason)
		return
	}
	now := r.b.o.Clock.Now()
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, uniqueStamp(now)), Namespace: ns},
		EventTime:           metav1.MicroTime{Time: now},
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relRef,
		Note:                fmt.Sprintf(note, args...),
		Type:                eventtype,
	}
	select {
	case r.b.queues[r.b.worker(ref.UID, ref.Name)] <- ev:
	default:
		Events.WithLabelValues("dropped_queue_full").Inc()
		logger.V(1).Info("Event queue full; Event dropped", "regarding", klogRef(ref), "reason", reason)
	}
}

// lastStamp is the last stamp an Event's name was given.
var lastStamp atomic.Int64

// uniqueStamp is now in nanoseconds, or past the last stamp given, so that two Events about
// one object never get the same name (a create would then find the other and be lost).
func uniqueStamp(now time.Time) int64 {
	for {
		last, stamp := lastStamp.Load(), now.UnixNano()
		if stamp <= last {
			stamp = last + 1
		}
		if lastStamp.CompareAndSwap(last, stamp) {
			return stamp
		}
	}
}

func klogRef(ref *corev1.ObjectReference) string { return ref.Namespace + "/" + ref.Name }

// worker is the queue of an object's Events: always the same one, so that they are
// written in order.
func (b *Broadcaster) worker(uid types.UID, name string) int {
	h := fnv.New32a()
	h.Write([]byte(uid))
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(len(b.queues)))
}

func keyOf(ev *eventsv1.Event) seriesKey {
	k := seriesKey{eventType: ev.Type, action: ev.Action, reason: ev.Reason, note: ev.Note,
		controller: ev.ReportingController, instance: ev.ReportingInstance, regarding: ev.Regarding}
	if ev.Related != nil {
		k.related = *ev.Related
	}
	return k
}

// repeat returns the series an Event repeats (and counts it), or nil for a new one.
func (b *Broadcaster) repeat(ev *eventsv1.Event) (name string, count int32, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	el, found := b.series[keyOf(ev)]
	if !found {
		return "", 0, false
	}
	e := el.Value.(*seriesEntry)
	if ev.EventTime.Sub(e.last) > b.o.SeriesWindow {
		b.recent.Remove(el)
		delete(b.series, e.key)
		return "", 0, false
	}
	e.count++
	e.last = ev.EventTime.Time
	b.recent.MoveToFront(el)
	return e.name, e.count, true
}

// remember makes ev the start of a series, forgetting the least recent one past the bound.
func (b *Broadcaster) remember(ev *eventsv1.Event) {
	if b.o.Series <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := keyOf(ev)
	if el, ok := b.series[k]; ok {
		b.recent.Remove(el)
	}
	b.series[k] = b.recent.PushFront(&seriesEntry{key: k, name: ev.Name, count: 1, last: ev.EventTime.Time})
	for b.recent.Len() > b.o.Series {
		oldest := b.recent.Back()
		b.recent.Remove(oldest)
		delete(b.series, oldest.Value.(*seriesEntry).key)
	}
}

// forget drops the series an Event started, when its Event is gone.
func (b *Broadcaster) forget(ev *eventsv1.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := keyOf(ev)
	if el, ok := b.series[k]; ok {
		b.recent.Remove(el)
		delete(b.series, k)
	}
}

// write creates the Event, or counts a repeat on the Event of its series, retrying
// what may pass.
func (b *Broadcaster) write(ctx context.Context, ev *eventsv1.Event) {
	logger := log.FromContext(ctx).WithName("events")
	name, count, isRepeat := b.repeat(ev) // once: a retry must not count the repeat again
	for attempt := 0; ; attempt++ {
		outcome, err := b.writeOnce(ctx, ev, name, count, isRepeat)
		isRepeat = isRepeat && outcome == "series"
		if err == nil {
			Events.WithLabelValues(outcome).Inc()
			return
		}
		if !retriable(err) || attempt >= b.o.Retries {
			Events.WithLabelValues("failed").Inc()
			logger.Error(err, "Could not write an Event; dropped", "regarding", klogRef(&ev.Regarding), "reason", ev.Reason)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.o.RetryWait):
		}
	}
}

// writeOnce returns the outcome of a write that succeeded.
// A repeat patches the series' Event; when that Event is gone, ev starts a new series.
func (b *Broadcaster) writeOnce(ctx context.Context, ev *eventsv1.Event, name string, count int32, isRepeat bool) (string, error) {
	if isRepeat {
		patch := fmt.Appendf(nil, `{"series":{"count":%d,"lastObservedTime":%q}}`, count, ev.EventTime.UTC().Format(metav1.RFC3339Micro))
		_, err := b.sink.Events(ev.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			return "series", err
		}
		b.forget(ev) // the series' Event is gone (expired, deleted): start a new one
	}
	_, err := b.sink.Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return "created", nil // a retry of a create that had succeeded
	case err != nil:
		return "", err
	}
	b.remember(ev)
	return "created", nil
}

// retriable: the apiserver did not answer, or answered that it could not now.
func retriable(err error) bool {
	if _, ok := err.(apierrors.APIStatus); !ok {
		return true // transport errors
	}
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
}
