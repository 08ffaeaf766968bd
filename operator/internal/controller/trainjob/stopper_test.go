package trainjob

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kiln-ml/kiln/api/telemetry"
)

func stopperClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, jobsetv1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
}

// The stopper deletes the JobSet and its Jobs once however often it is asked, and retries what
// the apiserver refused; the Jobs of another JobSet, or of a JobSet of the same name created
// since, are left. (That it deletes only that JobSet, by its UID, is the apiserver's
// precondition, which the fake client does not check.)
func TestStopperDeletesOnceAndRetries(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "js-1"}}
	jobOf := func(name, jobSet string, uid types.UID) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: jobSet, jobsetv1alpha2.JobSetUIDKey: string(uid)}}}
	}
	job := jobOf("job-node-0", "job", "js-1")
	other := jobOf("else-node-0", "else", "js-9")
	successor := jobOf("job-node-1", "job", "js-2")
	var deletes atomic.Int32
	c := stopperClient(t, interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if deletes.Add(1) == 1 {
			return apierrors.NewServiceUnavailable("the apiserver is busy")
		}
		return c.Delete(ctx, obj, opts...)
	}}, js, job, other, successor)
	s := newJobSetStopper(c)
	for range 3 {
		s.stop(context.Background(), js)
	}
	s.wait()
	if n := deletes.Load(); n != 2 {
		t.Errorf("%d JobSet deletions, want 2: one refused, one retried, none for the repeated asks", n)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(js), &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("the JobSet is still there: %v", err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(job), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("its Job is still there: %v", err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(other), &batchv1.Job{}); err != nil {
		t.Errorf("another JobSet's Job was deleted: %v", err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(successor), &batchv1.Job{}); err != nil {
		t.Errorf("the Job of a JobSet of the same name created since was deleted: %v", err)
	}

}

// The deletion is a span of the TrainJob's trace, its refused attempts events of it.
func TestStopperTracesTheDeletion(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "js-1"}}
	var deletes atomic.Int32
	c := stopperClient(t, interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if deletes.Add(1) == 1 {
			return apierrors.NewServiceUnavailable("the apiserver is busy")
		}
		return c.Delete(ctx, obj, opts...)
	}}, js)
	const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := telemetry.FromAnnotations(context.Background(), map[string]string{telemetry.TraceParentAnnotation: traceparent})
	s := newJobSetStopper(c)
	s.stop(ctx, js)
	s.wait()
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	if got := sp.SpanContext().TraceID().String(); got != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("trace %s, want the TrainJob's", got)
	}
	if got := sp.Parent().SpanID().String(); got != "b7ad6b7169203331" {
		t.Errorf("parent %s, want the TrainJob's span", got)
	}
	var events []string
	for _, e := range sp.Events() {
		events = append(events, e.Name)
	}
	if diff := cmp.Diff([]string{"refused"}, events); diff != "" {
		t.Errorf("span events (-want +got):\n%s", diff)
	}
}

// Under way at most stopParallel at once, and all of them done.
func TestStopperBoundsItsDeletions(t *testing.T) {
	var now, most atomic.Int32
	release := make(chan struct{})
	c := stopperClient(t, interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		return c.Delete(ctx, obj, opts...)
	}})
	s := newJobSetStopper(c)
	for i := range 3 * stopParallel {
		s.stop(context.Background(), &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js", UID: uidOf(i)}})
	}
	close(release)
	s.wait()
	if m := most.Load(); m > stopParallel {
		t.Errorf("%d deletions at once, want at most %d", m, stopParallel)
	}
	if len(s.underway) != 0 {
		t.Errorf("%d deletions still marked under way", len(s.underway))
	}
}

func uidOf(i int) types.UID { return types.UID(fmt.Sprintf("js-%d", i)) }

// The Jobs' deletion follows the JobSet's, at most jobsParallel at once, and is retried on
// its own: a refused one does not delete the JobSet again.
func TestStopperDeletesTheJobsAfterwardsBoundedAndRetried(t *testing.T) {
	var jobSetDeletes, now, most, collections atomic.Int32
	release := make(chan struct{})
	c := stopperClient(t, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			jobSetDeletes.Add(1)
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			n := now.Add(1)
			defer now.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			if collections.Add(1) == 1 {
				return apierrors.NewServiceUnavailable("the apiserver is busy")
			}
			return c.DeleteAllOf(ctx, obj, opts...)
		},
	})
	s := newJobSetStopper(c)
	const n = 3 * jobsParallel
	for i := range n {
		s.stop(context.Background(), &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("js-%d", i), UID: uidOf(i)}})
	}
	close(release)
	s.wait()
	if m := most.Load(); m > jobsParallel {
		t.Errorf("%d deletions of Jobs at once, want at most %d", m, jobsParallel)
	}
	if got := jobSetDeletes.Load(); got != n {
		t.Errorf("%d JobSet deletions, want %d: one each, the refused Jobs' deletion retried alone", got, n)
	}
	if got := collections.Load(); got != n+1 {
		t.Errorf("%d deletions of Jobs, want %d (one refused, retried)", got, n+1)
	}
}
