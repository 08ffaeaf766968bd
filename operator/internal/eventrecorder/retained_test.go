package eventrecorder

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// BenchmarkRetainedHeap is why this package exists: the heap each recorder still holds
// after recording one Event for each of 10,000 objects and writing what it kept, Kiln's against
// client-go's broadcaster (which keeps every Event for six minutes). docs/performance.md
// has the figures.
//
//	go test -run '^$' -bench RetainedHeap -benchtime 1x ./operator/internal/eventrecorder
func BenchmarkRetainedHeap(b *testing.B) {
	const objects = 10_000
	// As the operator does: controller-runtime's logger, unset, keeps every logger made.
	ctrllog.SetLogger(logr.Discard())
	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	for name, start := range map[string]func(ctx context.Context, sink discard) events.EventRecorder{
		"kiln": func(ctx context.Context, sink discard) events.EventRecorder {
			br := New(sink, scheme, DefaultOptions())
			go func() { _ = br.Start(ctx) }()
			return br.NewRecorder("c")
		},
		"client-go": func(ctx context.Context, sink discard) events.EventRecorder {
			br := events.NewBroadcaster(&events.EventSinkImpl{Interface: sink})
			br.StartRecordingToSink(ctx.Done())
			return br.NewRecorder(scheme, "c")
		},
	} {
		b.Run(name, func(b *testing.B) {
			var retained uint64
			for range b.N {
				ctx, cancel := context.WithCancel(context.Background())
				written := &atomic.Int32{}
				before := heap()
				rec := start(ctx, discard{written: written})
				for i := range objects {
					p := pod(fmt.Sprintf("p-%d", i))
					rec.Eventf(p, nil, corev1.EventTypeNormal, "Created", "Create", "Created pod %s", p.Name)
				}
				// Written, or dropped: until the writes stop for a moment.
				last := int32(-1)
				_ = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, time.Minute, false, func(context.Context) (bool, error) {
					n := written.Load()
					stopped := n == last
					last = n
					return stopped, nil
				})
				retained += heap() - min(before, heap())
				runtime.KeepAlive(rec)
				cancel()
			}
			b.ReportMetric(float64(retained)/float64(b.N)/objects, "retained-B/event")
		})
	}
}

// discard accepts every Event written and keeps none: only the recorder's memory counts.
type discard struct {
	eventsv1client.EventsV1Interface
	eventsv1client.EventInterface
	written *atomic.Int32
}

func (d discard) Events(string) eventsv1client.EventInterface { return d }

func (d discard) Create(_ context.Context, e *eventsv1.Event, _ metav1.CreateOptions) (*eventsv1.Event, error) {
	d.written.Add(1)
	return e, nil
}

func (d discard) Patch(_ context.Context, name string, _ types.PatchType, _ []byte, _ metav1.PatchOptions, _ ...string) (*eventsv1.Event, error) {
	d.written.Add(1)
	return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

// heap is the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
