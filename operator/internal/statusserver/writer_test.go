package statusserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Under the history budget, every job's status is still written at its interval, while the
// histories take turns: HistoryQPS of them a second, none lost, every one written in time.
func TestHistoryBudgetNeverDelaysStatus(t *testing.T) {
	scheme := testScheme(t)
	const jobs = 10
	var objs []client.Object
	var keys []types.NamespacedName
	for i := range jobs {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("job-%d", i), UID: types.UID(fmt.Sprint("uid-", i))}}
		objs = append(objs, tj)
		keys = append(keys, client.ObjectKeyFromObject(tj))
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&trainer.TrainJob{}).WithObjects(objs...).Build()
	clk := clocktesting.NewFakeClock(t0)
	w := newWriter(c, clk, WriterOptions{StatusInterval: time.Second, HistoryInterval: 10 * time.Second, HistoryQPS: 2})
	ctx := context.Background()

	histories := func() int {
		list := &kiln.TrainJobMetricsList{}
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	for second := range 5 {
		for _, k := range keys {
			w.add(k, status(clk.Now(), kiln.MetricStep, fmt.Sprint(second+1), "loss", "0.5"))
			w.write(ctx, k, false)
		}
		for _, k := range keys {
			tj := &trainer.TrainJob{}
			if err := c.Get(ctx, k, tj); err != nil {
				t.Fatal(err)
			}
			if tj.Status.TrainerStatus == nil || tj.Status.TrainerStatus.Metrics[0].Value != fmt.Sprint(second+1) {
				t.Fatalf("second %d: %s's status is %+v, want step %d written at once", second, k, tj.Status.TrainerStatus, second+1)
			}
		}
		// The budget's burst (2) at once, then 2 a second.
		if got, want := histories(), min(2+2*second, jobs); got != want {
			t.Fatalf("second %d: %d histories written, want %d (HistoryQPS 2)", second, got, want)
		}
		clk.Step(time.Second)
	}
	// Every job's history holds every report it had when its turn came.
	list := &kiln.TrainJobMetricsList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	for _, h := range list.Items {
		if len(h.Series) == 0 || h.Series[0].Count == 0 {
			t.Fatalf("history %s is empty: %+v", h.Name, h.Series)
		}
	}
	// With the reports still held, a shutdown writes them all, budget or not.
	w.flushAll()
	if got := histories(); got != jobs {
		t.Fatalf("after the flush, %d histories, want %d", got, jobs)
	}
}

// A report that arrives while the job's previous status is being written is written after
// it: the newest report is the stored one, whatever the timing (the last word of a trainer
// that posts once more before it exits).
func TestNewestReportWrittenLastWhileAWriteIsInFlight(t *testing.T) {
	scheme := testScheme(t)
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "uid"}}
	key := client.ObjectKeyFromObject(tj)
	inFlight, release := make(chan struct{}), make(chan struct{})
	writes := 0
	base := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&trainer.TrainJob{}).WithObjects(tj).Build()
	c := interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			if writes == 1 {
				close(inFlight)
				<-release
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	w := newWriter(c, clock.RealClock{}, WriterOptions{StatusInterval: 50 * time.Millisecond, HistoryInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	w.add(key, status(time.Now(), kiln.MetricStep, "40"))
	<-inFlight
	w.add(key, status(time.Now(), "raw", "kubeflow-sdk"))
	close(release)
	waitForStored(ctx, t, base, key, "the newest report was not written", func(first trainer.Metric) bool { return first.Name == "raw" })
}

// A write the apiserver never answers times out and is retried: the job's later reports are
// not held behind it (docs/reliability.md, "When the apiserver does not answer").
func TestAWriteNeverAnsweredIsRetried(t *testing.T) {
	scheme := testScheme(t)
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "uid"}}
	key := client.ObjectKeyFromObject(tj)
	var mu sync.Mutex
	writes := 0
	base := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&trainer.TrainJob{}).WithObjects(tj).Build()
	c := interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			mu.Lock()
			writes++
			first := writes == 1
			mu.Unlock()
			if first {
				<-ctx.Done() // never answered: only its deadline ends it
				return ctx.Err()
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	w := newWriter(c, clock.RealClock{}, WriterOptions{StatusInterval: 50 * time.Millisecond, HistoryInterval: time.Hour, RequestTimeout: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	w.add(key, status(time.Now(), kiln.MetricStep, "16"))
	w.add(key, status(time.Now(), kiln.MetricStep, "40"))
	waitForStored(ctx, t, base, key, "the report was not written after a write that was never answered", func(first trainer.Metric) bool { return first.Value == "40" })
}

// A status write that keeps failing says so at the default verbosity, on its first failure
// and every failedLogEvery-th (the rest at V(2)), and once when it succeeds again; the
// report it held is written then.
func TestFailingWritesAreLoggedAtDefaultVerbosity(t *testing.T) {
	scheme := testScheme(t)
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "uid"}}
	key := client.ObjectKeyFromObject(tj)
	failures := failedLogEvery + 1
	base := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&trainer.TrainJob{}).WithObjects(tj).Build()
	c := interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if failures > 0 {
				failures--
				return apierrors.NewServiceUnavailable("the apiserver is busy")
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	clk := clocktesting.NewFakeClock(t0)
	w := newWriter(c, clk, WriterOptions{StatusInterval: time.Second, HistoryInterval: time.Hour})
	var logged []string
	// Verbosity 0: what an operator at the default level shows.
	ctx := klog.NewContext(context.Background(), funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}))

	w.add(key, status(clk.Now(), kiln.MetricStep, "7"))
	for range failedLogEvery + 2 {
		w.write(ctx, key, false)
		clk.Step(time.Second)
	}
	tj = &trainer.TrainJob{}
	if err := base.Get(ctx, key, tj); err != nil {
		t.Fatal(err)
	}
	if ts := tj.Status.TrainerStatus; ts == nil || ts.Metrics[0].Value != "7" {
		t.Fatalf("the report was not written once the apiserver answered: %+v", ts)
	}
	want := []string{
		`"level"=0 "msg"="Writing the trainer status failed; retrying every second" "trainJob"={"name"="job" "namespace"="ns"} "err"="the apiserver is busy" "failedInARow"=1`,
		fmt.Sprintf(`"level"=0 "msg"="Writing the trainer status failed; retrying every second" "trainJob"={"name"="job" "namespace"="ns"} "err"="the apiserver is busy" "failedInARow"=%d`, failedLogEvery),
		fmt.Sprintf(`"level"=0 "msg"="Wrote the trainer status after failed attempts" "trainJob"={"name"="job" "namespace"="ns"} "failedInARow"=%d`, failedLogEvery+1),
	}
	if len(logged) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(logged), len(want), strings.Join(logged, "\n"))
	}
	for i := range want {
		if logged[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, logged[i], want[i])
		}
	}
}

// A history write that finds its TrainJobMetrics gone, the TrainJob still there, loses
// nothing: the job's pending status is written at its turn and the history again with every
// report. Once the TrainJob is gone, its reports are dropped.
func TestHistoryGoneKeepsTheJobsReports(t *testing.T) {
	scheme := testScheme(t)
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "uid"}}
	key := client.ObjectKeyFromObject(tj)
	creates := 0
	base := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&trainer.TrainJob{}).WithObjects(tj).Build()
	c := interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*kiln.TrainJobMetrics); ok {
				if creates++; creates == 1 {
					return apierrors.NewNotFound(kiln.GroupVersion.WithResource("trainjobmetrics").GroupResource(), obj.GetName())
				}
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	clk := clocktesting.NewFakeClock(t0)
	w := newWriter(c, clk, WriterOptions{StatusInterval: time.Second, HistoryInterval: 10 * time.Second})
	ctx := context.Background()
	stored := func() string {
		got := &trainer.TrainJob{}
		if err := base.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		if got.Status.TrainerStatus == nil {
			return ""
		}
		return got.Status.TrainerStatus.Metrics[0].Value
	}

	w.add(key, status(clk.Now(), kiln.MetricStep, "1", "loss", "0.9"))
	w.write(ctx, key, false) // the status, then a history write that finds it gone
	if got := stored(); got != "1" {
		t.Fatalf("stored step %q, want 1", got)
	}
	w.add(key, status(clk.Now(), kiln.MetricStep, "2", "loss", "0.8"))
	clk.Step(time.Second)
	w.write(ctx, key, false)
	if got := stored(); got != "2" {
		t.Fatalf("after the history was found gone, stored step %q, want 2: the job's reports were dropped", got)
	}
	h := &kiln.TrainJobMetrics{}
	if err := base.Get(ctx, key, h); err != nil {
		t.Fatalf("the history was not written again: %v", err)
	}
	if len(h.Series) == 0 || h.Series[0].Count != 2 {
		t.Fatalf("the history holds %+v, want both reports", h.Series)
	}

	// The TrainJob gone: its next write finds it gone (the status write, first) and the job
	// is forgotten; a history write that found it gone would say the same (jobGone).
	if err := base.Delete(ctx, tj); err != nil {
		t.Fatal(err)
	}
	if err := base.Delete(ctx, h); err != nil {
		t.Fatal(err)
	}
	creates = 0
	w.add(key, status(clk.Now(), kiln.MetricStep, "3"))
	clk.Step(10 * time.Second)
	w.write(ctx, key, false)
	w.mu.Lock()
	_, held := w.jobs[key]
	w.mu.Unlock()
	if held {
		t.Fatal("the reports of a deleted TrainJob are still held")
	}
	if !w.jobGone(ctx, key, &pending{uid: "uid"}) {
		t.Fatal("jobGone: a deleted TrainJob is not gone")
	}
}

// waitForStored waits until the stored trainerStatus of key has a first metric that stored
// accepts; past wait.ForeverTestTimeout it fails with what (and the status stored).
func waitForStored(ctx context.Context, t *testing.T, c client.Client, key types.NamespacedName, what string, stored func(first trainer.Metric) bool) {
	t.Helper()
	deadline := time.After(wait.ForeverTestTimeout)
	for {
		got := &trainer.TrainJob{}
		if err := c.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		if ts := got.Status.TrainerStatus; ts != nil && len(ts.Metrics) > 0 && stored(ts.Metrics[0]) {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s: status %+v", what, got.Status.TrainerStatus)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// testScheme knows TrainJobs and TrainJobMetrics, what the writer writes.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := kiln.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}
