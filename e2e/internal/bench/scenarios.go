package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/internal/stats"
)

// runResult is what one run measured for one controller.
type runResult struct {
	Trainer string
	Run     int
	// Submit is how long the bench took to create the N TrainJobs; AllJobSets from the
	// first create until the last of their JobSets was seen.
	Submit, AllJobSets time.Duration
	// Webhook is the time the apiserver spent in the controller's own webhooks per
	// TrainJob create, over the throughput scenario.
	Webhook time.Duration
	// Limit is the same for a plain client creating the same JobSets directly with the
	// controllers' client budget.
	Limit time.Duration
	// Floor is the throughput figure with no controller at all: the same TrainJob creates,
	// each followed by its JobSet's create from a plain client with the controllers' budget.
	// FloorSubmit is how long its TrainJob creates took, first to last, and FloorWebhook the
	// time the apiserver spent in the controller's webhooks per create meanwhile.
	Floor, FloorSubmit, FloorWebhook time.Duration
	// IdleWebhook is the time in the controller's webhooks per create, and IdleCreate each
	// create call's duration, of TrainJobs created one at a time on an idle platform: each
	// once the controller and the platform are done with the one before (its JobSet exists,
	// then idleSettle). SeqWebhook and SeqCreate are the same for TrainJobs created one after
	// another, each while the controller still acts on the ones before.
	IdleWebhook, SeqWebhook time.Duration
	IdleCreate, SeqCreate   []time.Duration
	// DeadlineLag: due instant to Failed/DeadlineExceeded seen, per TrainJob;
	// DeadlineMissed: those that never failed; Recreated: JobSets created again after the
	// deadline deleted them.
	DeadlineLag []time.Duration
	// KillLag: due instant to the JobSet seen deleted (every pod told to stop).
	KillLag        []time.Duration
	DeadlineMissed int
	Recreated      int
	// DueEarly: deadlines due before the last JobSet existed, so that the deadline
	// figures include the controller's creation work still going on.
	DueEarly int
	// DeadlineLoad is what loaded the machine while the deadlines fired.
	DeadlineLoad *deadlineLoad
	// TTLLag: due instant to the TrainJob's deletion seen (Kiln only: upstream has no TTL).
	TTLLag    []time.Duration
	TTLMissed int
	// DeadlineWritten, KillWritten and TTLWritten are DeadlineLag, KillLag and TTLLag to
	// the instant the apiserver answered the write instead of the one a watch delivered it;
	// DeadlineReceived, KillReceived and TTLReceived to the instant the apiserver began
	// handling the write (from the audit log; only with Options.Audit).
	DeadlineWritten, KillWritten, TTLWritten    []time.Duration
	DeadlineReceived, KillReceived, TTLReceived []time.Duration
	// AdmissionLag: the Workload seen Admitted to the JobSet seen running; split into
	// Kueue's part (to the TrainJob seen resumed) and the controller's (from there to
	// the JobSet seen running).
	AdmissionLag, KueueLag, ResumeLag []time.Duration
	// Writes are the apiserver's write requests per TrainJob lifecycle (queued, admitted,
	// run, complete), by resource.
	Writes map[string]float64
	// WritesBy are the same by writer, request and outcome (from the audit log; only with
	// Options.Audit).
	WritesBy map[string]float64
	// MemoryJobs TrainJobs existed when RSS was sampled; MemoryPeakRSS is the restarted
	// controller's peak until then. PeakRSS and CPU are over the timed scenarios.
	MemoryJobs                  int
	RSS, MemoryPeakRSS, PeakRSS int64
	// Heap is the controller's Go heap in use (runtime.MemStats.HeapInuse) at the memory
	// sample.
	Heap int64
	CPU  time.Duration
}

const (
	simManager = "bench.kiln.dev/simulation"
	gpu        = corev1.ResourceName("nvidia.com/gpu")
)

// benchJob is a one-node torch TrainJob on the torch-distributed ClusterTrainingRuntime,
// which Kiln's catalog and upstream's runtimes both ship; podRun is how long KWOK runs
// its pod ("" for the platform's default).
func benchJob(ns, name string, suspend bool, podRun string) *trainer.TrainJob {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
			Trainer:    &trainer.Trainer{Image: ptr.To("docker.io/bench/train:latest"), Command: []string{"torchrun", "train.py"}, NumNodes: ptr.To[int32](1)},
			Suspend:    ptr.To(suspend),
		},
	}
	if podRun != "" {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{platform.SimulatedPods(simManager, "node", map[string]string{platform.AnnotationSimDuration: podRun})}
	}
	return tj
}

func (e *env) namespace(ctx context.Context, name string) error {
	err := e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// createMany creates n objects with 32 writers, retrying what the apiserver throttles.
func createMany(ctx context.Context, c client.Client, n int, mk func(i int) client.Object) error {
	return forEach(ctx, n, func(i int) error { return createRetrying(ctx, c, mk(i)) })
}

// forEach calls do for 0..n-1 with 32 writers, until the first error.
func forEach(ctx context.Context, n int, do func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// forEachOf calls do for each item of items with workers goroutines, until items is closed
// and drained; after the first error it drains items without calling do.
func forEachOf[T any](ctx context.Context, items <-chan T, workers int, do func(T) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range max(workers, 1) {
		wg.Go(func() {
			for item := range items {
				mu.Lock()
				failed := first != nil
				mu.Unlock()
				if failed || ctx.Err() != nil {
					continue
				}
				if err := do(item); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// createRetrying creates obj (done if it exists), retrying what the apiserver throttles.
func createRetrying(ctx context.Context, c client.Client, obj client.Object) error {
	var err error
	for attempt := range 10 {
		if err = c.Create(ctx, obj); err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return fmt.Errorf("creating %s: %w", obj.GetName(), err)
}

// limit: a plain client with the controllers' budget creates the same JobSets (copies of
// one the controller rendered in the deadline scenario) directly.
func limit(ctx context.Context, e *env, r *runResult) error {
	const ns = limitNamespace
	if err := e.namespace(ctx, ns); err != nil {
		return err
	}
	// The deadline scenario's pods must not weigh on it.
	c, jobSet, err := e.renderedCopies(ctx, "limit", deadlineNamespace)
	if err != nil {
		return err
	}
	n := e.o.Jobs
	start := time.Now()
	if err := createMany(ctx, c, n, func(i int) client.Object {
		return jobSet(ns, fmt.Sprintf("js-%05d", i))
	}); err != nil {
		return err
	}
	last, err := e.allJobSets(ctx, ns, n, 10*time.Minute)
	if err != nil {
		return err
	}
	r.Limit = last.Sub(start)
	e.logf("limit: %d JobSets created directly in %s", n, r.Limit.Round(time.Millisecond))
	// They are not TrainJobs; they must not weigh on the memory figure. Nothing timed
	// follows but the floor, which waits for them to go; otherwise the namespace
	// controller deletes them while the memory scenario starts.
	return e.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}

// limitNamespace holds the limit scenario's JobSets.
const limitNamespace = "bench-limit"

// renderedCopies is, once the Jobs and pods of namespace after are gone, a plain client with
// the controllers' budget and a maker of copies of the JobSet the controller rendered in the
// deadline scenario, which scenario needs.
func (e *env) renderedCopies(ctx context.Context, scenario, after string) (client.Client, func(ns, name string) client.Object, error) {
	if e.rendered == nil {
		return nil, nil, fmt.Errorf("the %s needs a JobSet the controller rendered: run the deadline scenario first", scenario)
	}
	if err := e.settle(ctx, after); err != nil {
		return nil, nil, err
	}
	spec, _, _ := unstructured.NestedMap(e.rendered.Object, "spec")
	cfg := rest.CopyConfig(e.cfg)
	cfg.QPS, cfg.Burst = float32(e.o.Budget.QPS), e.o.Budget.Burst
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, nil, err
	}
	return c, func(ns, name string) client.Object {
		js := platform.UnstructuredOf(platform.JobSetGVK)
		js.SetNamespace(ns)
		js.SetName(name)
		_ = unstructured.SetNestedMap(js.Object, runtimeDeepCopy(spec), "spec")
		return js
	}, nil
}

// floorNamespace holds the floor scenario's TrainJobs and JobSets.
const floorNamespace = "bench-floor"

// floor: the throughput scenario's work with no controller in it, the least any controller
// can take for that figure on this platform. The bench creates the same TrainJobs with the
// same 32 writers, through the same webhooks (the controller's and Kueue's), and as each
// create returns, one of as many JobSet creators as the controllers have workers creates its
// JobSet (a copy of one the controller rendered, as the limit's) with a plain client and the
// controllers' budget. The TrainJobs are managed by
// MultiKueue, which nothing on this single cluster acts on: neither controller renders,
// writes a status or records an event for them, and Kueue ignores a job without a queue.
// Timed from the first TrainJob create to the last JobSet seen, as the throughput figure.
func floor(ctx context.Context, e *env, r *runResult) error {
	const ns = floorNamespace
	// The limit's JobSets and pods must not weigh on it.
	c, jobSet, err := e.renderedCopies(ctx, "floor", limitNamespace)
	if err != nil {
		return err
	}
	if err := e.namespace(ctx, ns); err != nil {
		return err
	}
	n, secs := e.o.Jobs, int64(e.o.Deadline/time.Second)
	secs0, _, err := webhookSeconds(ctx, e.cfg)
	if err != nil {
		return err
	}
	// The JobSets' creators, as many as the controllers' workers, take each TrainJob as its
	// create returns: the writers never wait for a JobSet, as they do not for a controller.
	created := make(chan string, n)
	jobSets := make(chan error, 1)
	go func() {
		jobSets <- forEachOf(ctx, created, e.o.Budget.Concurrency, func(name string) error {
			return createRetrying(ctx, c, jobSet(ns, name))
		})
	}()
	start := time.Now()
	err = forEach(ctx, n, func(i int) error {
		name := fmt.Sprintf("tj-%05d", i)
		tj := benchJob(ns, name, false, "1h")
		tj.Spec.ActiveDeadlineSeconds = ptr.To(secs)
		tj.Spec.ManagedBy = ptr.To(trainer.MultiKueueControllerName)
		if err := createRetrying(ctx, e.c, tj); err != nil {
			return err
		}
		created <- name
		return nil
	})
	r.FloorSubmit = time.Since(start)
	close(created)
	if err := errors.Join(err, <-jobSets); err != nil {
		return err
	}
	last, err := e.allJobSets(ctx, ns, n, 10*time.Minute)
	if err != nil {
		return err
	}
	secs1, _, err := webhookSeconds(ctx, e.cfg)
	if err != nil {
		return err
	}
	r.Floor = last.Sub(start)
	r.FloorWebhook = time.Duration((secs1 - secs0) / float64(n) * float64(time.Second))
	e.logf("floor: %d TrainJobs and their JobSets created with no controller in %s (the TrainJobs in %s, webhooks %s per create)",
		n, r.Floor.Round(time.Millisecond), r.FloorSubmit.Round(time.Millisecond), r.FloorWebhook.Round(100*time.Microsecond))
	// As the limit's: deleted while the memory scenario starts.
	return e.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}

// idleCreates is how many TrainJobs idleAdmission creates in each of its two ways.
const idleCreates = 50

// idleSettle is how long idleAdmission waits after a TrainJob's JobSet appeared before it
// creates the next TrainJob: long enough for JobSet and the Job controller to create its
// suspended Jobs (tens of milliseconds on an idle platform).
const idleSettle = 300 * time.Millisecond

// idleAdmission times admission before the throughput scenario, on a platform with nothing
// else to do (the Kueue scenario before it has finished), two ways. Idle: suspended TrainJobs
// created one at a time, each once the controller has created the previous one's JobSet and
// the platform has settled: what one kubectl apply pays. One after another: the next create
// as soon as the previous returns, so that each competes for the two cores with the
// controller's and the platform's work on the previous ones (a controller that reacts sooner
// has more of it in the window). The throughput scenario's figure adds the wait for CPU on a
// platform that creates 1,000 jobs' JobSets, Jobs and pods meanwhile.
func idleAdmission(ctx context.Context, e *env, r *runResult) error {
	const ns = "bench-admission"
	if err := e.namespace(ctx, ns); err != nil {
		return err
	}
	var err error
	r.IdleWebhook, r.IdleCreate, err = timeCreates(ctx, e, ns, "idle", func(name string) error {
		return waitFor(ctx, 30*time.Second, "the JobSet of TrainJob "+name, func() (bool, string) {
			_, ok := e.tracker.at(e.tracker.jobSetSeen, types.NamespacedName{Namespace: ns, Name: name})
			return ok, "not seen yet"
		})
	})
	if err != nil {
		return err
	}
	e.logf("idle admission: webhooks took %s per create, create p50 %s", r.IdleWebhook.Round(100*time.Microsecond),
		stats.Percentile(r.IdleCreate, 50).Round(100*time.Microsecond))
	if r.SeqWebhook, r.SeqCreate, err = timeCreates(ctx, e, ns, "seq", nil); err != nil {
		return err
	}
	e.logf("admission one after another: webhooks took %s per create, create p50 %s", r.SeqWebhook.Round(100*time.Microsecond),
		stats.Percentile(r.SeqCreate, 50).Round(100*time.Microsecond))
	// Gone before the throughput scenario starts.
	if err := e.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	return waitFor(ctx, 2*time.Minute, "namespace "+ns+" deleted", func() (bool, string) {
		err := e.c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
	})
}

// timeCreates creates idleCreates suspended TrainJobs named prefix-NNN in namespace ns, one
// at a time, calling settled (when not nil) after each create and waiting idleSettle more
// before the next. It returns the time the apiserver spent in the controller's webhooks per
// create and each create call's duration.
func timeCreates(ctx context.Context, e *env, ns, prefix string, settled func(name string) error) (time.Duration, []time.Duration, error) {
	secs0, _, err := webhookSeconds(ctx, e.cfg)
	if err != nil {
		return 0, nil, err
	}
	var took []time.Duration
	for i := range idleCreates {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		start := time.Now()
		if err := e.c.Create(ctx, benchJob(ns, name, true, "")); err != nil {
			return 0, nil, fmt.Errorf("creating TrainJob %s of the admission scenario: %w", name, err)
		}
		took = append(took, time.Since(start))
		if settled == nil {
			continue
		}
		if err := settled(name); err != nil {
			return 0, nil, err
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-time.After(idleSettle):
		}
	}
	// Only the webhooks' time of the creates above: the settling adds no call of theirs.
	secs1, _, err := webhookSeconds(ctx, e.cfg)
	if err != nil {
		return 0, nil, err
	}
	return time.Duration((secs1 - secs0) / idleCreates * float64(time.Second)), took, nil
}

// allJobSets waits until n JobSets of namespace ns have been seen, and says when the last
// of them was.
func (e *env) allJobSets(ctx context.Context, ns string, n int, timeout time.Duration) (time.Time, error) {
	err := waitFor(ctx, timeout, "every JobSet", func() (bool, string) {
		got := e.tracker.count(e.tracker.jobSetSeen, ns)
		return got == n, fmt.Sprintf("%d of %d", got, n)
	})
	return e.tracker.latest(e.tracker.jobSetSeen, ns), err
}

// settle waits until namespace ns has no Jobs and no pods left, so that the garbage
// collection of one scenario does not weigh on the next one's figures.
func (e *env) settle(ctx context.Context, ns string) error {
	start := time.Now()
	left := func(list *metav1.PartialObjectMetadataList) int {
		if err := e.c.List(ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil {
			return -1
		}
		return len(list.Items)
	}
	jobs, pods := &metav1.PartialObjectMetadataList{}, &metav1.PartialObjectMetadataList{}
	jobs.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	err := waitFor(ctx, 3*time.Minute, "namespace "+ns+" to be emptied of Jobs and pods", func() (bool, string) {
		j, p := left(jobs), left(pods)
		return j == 0 && p == 0, fmt.Sprintf("Jobs left: %v, pods left: %v", j != 0, p != 0)
	})
	if err == nil {
		e.logf("%s: Jobs and pods gone after %s", ns, time.Since(start).Round(100*time.Millisecond))
	}
	return err
}

func runtimeDeepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// deadlines: N running TrainJobs at once, whose activeDeadlineSeconds all fall due within
// the submission window. Throughput is how long until all their JobSets exist; deadline
// precision the lag from each due instant to Failed/DeadlineExceeded. Half of them
// carry a ttlSecondsAfterFinished too, and on Kiln the lag from each failure's due TTL to
// the TrainJob's deletion is the TTL figure (upstream has no TTL and keeps them). Half,
// so that the failed TrainJobs the memory figure counts on are not all gone on Kiln.
func deadlines(ctx context.Context, e *env, r *runResult) error {
	const ns = deadlineNamespace
	if err := e.namespace(ctx, ns); err != nil {
		return err
	}
	if err := idleAdmission(ctx, e, r); err != nil {
		return err
	}
	n := e.o.Jobs
	secs, ttl := int64(e.o.Deadline/time.Second), int32(e.o.TTL/time.Second)
	secs0, calls0, err := webhookSeconds(ctx, e.cfg)
	if err != nil {
		return err
	}
	cpu := e.profileCPU(ctx, r, "submission", "throughput: the submission", submissionProfileSeconds)
	start := time.Now()
	if err := createMany(ctx, e.c, n, func(i int) client.Object {
		tj := benchJob(ns, fmt.Sprintf("tj-%05d", i), false, "1h")
		tj.Spec.ActiveDeadlineSeconds = ptr.To(secs)
		if i%2 == 0 {
			tj.Spec.TTLSecondsAfterFinished = ptr.To(ttl)
		}
		return tj
	}); err != nil {
		return err
	}
	r.Submit = time.Since(start)
	if err := cpu(); err != nil {
		return err
	}
	secs1, calls1, err := webhookSeconds(ctx, e.cfg)
	if err != nil {
		return err
	}
	r.Webhook = time.Duration((secs1 - secs0) / float64(n) * float64(time.Second))
	e.logf("throughput: webhooks took %s per create (%v calls)", r.Webhook.Round(100*time.Microsecond), calls1-calls0)
	// The limit's model: one of the first JobSets, read long before its deadline deletes it.
	if err := waitFor(ctx, 2*time.Minute, "a first JobSet", func() (bool, string) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(platform.JobSetGVK.GroupVersion().WithKind("JobSetList"))
		if err := e.c.List(ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil || len(list.Items) == 0 {
			return false, "none yet"
		}
		e.rendered = &list.Items[0]
		return true, ""
	}); err != nil {
		return err
	}
	last, err := e.allJobSets(ctx, ns, n, 10*time.Minute)
	if err != nil {
		return err
	}
	r.AllJobSets = last.Sub(start)
	e.logf("throughput: %d TrainJobs submitted in %s, all JobSets in %s", n, r.Submit.Round(time.Millisecond), r.AllJobSets.Round(time.Millisecond))
	if err := e.untilFirstDeadline(ctx, ns); err != nil {
		return err
	}
	deadlineView, ttlView := e.operatorViewOfDeadlines(ctx)
	loadView := e.loadWhileDeadlinesFire(ctx, n)
	cpu = e.profileCPU(ctx, r, "deadlines", "deadline: the deadlines firing", deadlinesProfileSeconds)
	err = waitFor(ctx, e.o.Deadline+3*time.Minute, "every deadline", func() (bool, string) {
		got := e.tracker.count(e.tracker.deadlineSeen, ns)
		return got == n, fmt.Sprintf("%d of %d", got, n)
	})
	r.DeadlineMissed = n - e.tracker.count(e.tracker.deadlineSeen, ns)
	if err != nil {
		e.logf("deadline: %v", err)
	}
	deadlineView()
	r.DeadlineLoad = loadView()
	if err := cpu(); err != nil {
		return err
	}
	lastDeadline := time.Now()
	if e.p.Trainer == platform.TrainerKiln {
		withTTL := (n + 1) / 2
		err := waitFor(ctx, e.o.TTL+2*time.Minute, "every TTL", func() (bool, string) {
			got := e.tracker.count(e.tracker.deletedSeen, ns)
			return got >= withTTL, fmt.Sprintf("%d of %d deleted", got, withTTL)
		})
		r.TTLLag = e.tracker.lags(e.tracker.deletedSeen, e.tracker.ttlDue, ns)
		r.TTLMissed = withTTL - e.tracker.count(e.tracker.deletedSeen, ns)
		if err != nil {
			e.logf("TTL: %v", err)
		}
		e.logf("TTL: %d deleted (%d missed), p50 %s, p99 %s", len(r.TTLLag), r.TTLMissed, stats.Percentile(r.TTLLag, 50), stats.Percentile(r.TTLLag, 99))
		ttlView()
	}
	// Give a controller that recreates deleted JobSets the time to show it.
	time.Sleep(time.Until(lastDeadline.Add(10 * time.Second)))
	r.DeadlineLag = e.tracker.lags(e.tracker.deadlineSeen, e.tracker.deadlineDue, ns)
	r.KillLag = e.tracker.lags(e.tracker.jobSetGone, e.tracker.deadlineDue, ns)
	e.logf("deadline: Failed by the second its deadline fell due in (from the first): %s", formatByDue(e.tracker.lagsByDue(e.tracker.deadlineSeen, e.tracker.deadlineDue, ns)))
	if e.o.Audit {
		if err := e.timersWritten(r, ns); err != nil {
			return err
		}
	}
	r.Recreated = e.tracker.recreatedJobSets(ns)
	r.DueEarly = e.tracker.countBefore(e.tracker.deadlineDue, ns, last)
	e.logf("deadline: %d fired (%d missed), p50 %s, p99 %s; JobSet deleted p50 %s, p99 %s; %d JobSets recreated", len(r.DeadlineLag), r.DeadlineMissed,
		stats.Percentile(r.DeadlineLag, 50), stats.Percentile(r.DeadlineLag, 99), stats.Percentile(r.KillLag, 50), stats.Percentile(r.KillLag, 99), r.Recreated)
	return nil
}

// profileCPU starts a CPU profile of Kiln's operator of the next seconds, saved as
// kiln-NAME-runN.cpu, when profiles are asked for (--profiles): where the operator's CPU goes
// over a scenario's busiest moments (what says which). The function it returns waits for it.
func (e *env) profileCPU(ctx context.Context, r *runResult, name, what string, seconds int) func() error {
	if e.o.Profiles == "" || e.p.Trainer != platform.TrainerKiln {
		return func() error { return nil }
	}
	path := filepath.Join(e.o.Profiles, fmt.Sprintf("kiln-%s-run%d.cpu", name, r.Run))
	done := make(chan error, 1)
	go func() { done <- e.saveProfile(ctx, fmt.Sprintf("profile?seconds=%d", seconds), path) }()
	return func() error {
		if err := <-done; err != nil {
			return err
		}
		e.logf("%s: CPU profile of the first %ds in %s (go tool pprof -top %s)", what, seconds, path, path)
		return nil
	}
}

// submissionProfileSeconds is how long the submission's CPU profile lasts: about the
// submission of 1,000 TrainJobs on this machine. deadlinesProfileSeconds: about the window
// in which their 1,000 deadlines fire.
const (
	submissionProfileSeconds = 10
	deadlinesProfileSeconds  = 20
)

// deadlineNamespace holds the deadline scenario's TrainJobs.
const deadlineNamespace = "bench-deadline"

// queueNamespace holds the Kueue scenario's TrainJobs; the apiserver audits its writes.
const queueNamespace = "bench-queue"

// admission: queued TrainJobs of one GPU each through a LocalQueue, more than the quota
// holds at once, so Kueue admits them in waves as others complete; lag from admission to
// the JobSet running, and the apiserver's writes per TrainJob over the whole lifecycle.
func admission(ctx context.Context, e *env, r *runResult) error {
	const ns = queueNamespace
	if err := e.namespace(ctx, ns); err != nil {
		return err
	}
	lq := platform.UnstructuredOf(platform.WorkloadGVK.GroupVersion().WithKind("LocalQueue"))
	lq.SetNamespace(ns)
	lq.SetName("bench")
	_ = unstructured.SetNestedField(lq.Object, "cluster-queue", "spec", "clusterQueue")
	if err := e.c.Create(ctx, lq); err != nil {
		return fmt.Errorf("creating the LocalQueue: %w", err)
	}
	before, err := writeCounts(ctx, e.cfg)
	if err != nil {
		return err
	}
	n := e.o.QueuedJobs
	one := resource.MustParse("1")
	if err := createMany(ctx, e.c, n, func(i int) client.Object {
		tj := benchJob(ns, fmt.Sprintf("tj-%05d", i), true, "")
		tj.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "bench"}
		tj.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: one}, Limits: corev1.ResourceList{gpu: one}}
		return tj
	}); err != nil {
		return err
	}
	if err := waitFor(ctx, 10*time.Minute, "every queued TrainJob to finish", func() (bool, string) {
		got := e.tracker.count(e.tracker.finishedSeen, ns)
		return got == n, fmt.Sprintf("%d of %d finished", got, n)
	}); err != nil {
		return err
	}
	after, err := writeCounts(ctx, e.cfg)
	if err != nil {
		return err
	}
	r.Writes = map[string]float64{}
	for res, v := range after {
		if d := v - before[res]; d > 0 {
			r.Writes[res] = d / float64(n)
		}
	}
	if e.o.Audit {
		by, err := auditedWrites(e.p.AuditLogFile(), ns)
		if err != nil {
			return err
		}
		r.WritesBy = map[string]float64{}
		for k, v := range by {
			r.WritesBy[k] = v / float64(n)
		}
	}
	r.AdmissionLag = e.tracker.lags(e.tracker.jobSetResumed, e.tracker.admittedSeen, ns)
	r.KueueLag = e.tracker.lags(e.tracker.resumedSeen, e.tracker.admittedSeen, ns)
	r.ResumeLag = e.tracker.lags(e.tracker.jobSetResumed, e.tracker.resumedSeen, ns)
	e.logf("admission: %d admitted, p50 %s, p99 %s (Kueue p50 %s, controller p50 %s p99 %s); %.1f writes per TrainJob", len(r.AdmissionLag),
		stats.Percentile(r.AdmissionLag, 50), stats.Percentile(r.AdmissionLag, 99), stats.Percentile(r.KueueLag, 50),
		stats.Percentile(r.ResumeLag, 50), stats.Percentile(r.ResumeLag, 99), sumValues(r.Writes))
	return nil
}

// memory: restarts the controller with the memory budget, tops the cluster up to
// MemoryJobs TrainJobs (the failed and completed ones of the earlier scenarios
// plus, half and half, running ones and suspended ones like a queue's backlog) and samples
// the controller's RSS once it has caught up. The restart is also the worst case for
// memory: a controller that lists them all at once. The top-up TrainJobs use a copy of the
// runtime whose JobSets name another manager (spec.managedBy), so that the JobSet
// controller leaves them be: the TrainJob controller does all its work for them (a running
// one's JobSet simply never reports progress), the rest of the platform none.
func memory(ctx context.Context, e *env, r *runResult) error {
	const ns = "bench-memory"
	if err := e.namespace(ctx, ns); err != nil {
		return err
	}
	if err := e.unmanagedRuntime(ctx); err != nil {
		return err
	}
	begin := time.Now()
	if err := e.p.RestartTrainer(ctx, e.o.MemoryBudget); err != nil {
		return fmt.Errorf("restarting the controller with the memory budget: %w", err)
	}
	e.logf("memory: controller restarted in %s", time.Since(begin).Round(100*time.Millisecond))
	begin = time.Now()
	all := &trainer.TrainJobList{}
	if err := e.cache.List(ctx, all); err != nil {
		return err
	}
	n := max(e.o.MemoryJobs-len(all.Items), 0)
	if err := createMany(ctx, e.c, n, func(i int) client.Object {
		tj := benchJob(ns, fmt.Sprintf("tj-%05d", i), i%2 == 0, "")
		tj.Spec.RuntimeRef.Name = unmanagedRuntime
		return tj
	}); err != nil {
		return err
	}
	e.logf("memory: %d TrainJobs created in %s", n, time.Since(begin).Round(100*time.Millisecond))
	// A fixed timeout cut a slow controller's rendering short (docs/performance.md, "Where
	// the memory goes"), so the wait lasts while JobSets keep appearing and gives up after 5
	// minutes without a new one.
	if err := waitWhileProgressing(ctx, 5*time.Minute, "every JobSet", func() (bool, int, string) {
		got := e.tracker.count(e.tracker.jobSetSeen, ns)
		return got == n, got, fmt.Sprintf("%d of %d", got, n)
	}); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	pid, running := e.p.TrainerProcess().Running()
	if !running {
		return fmt.Errorf("the controller exited")
	}
	u, err := readProcUsage(pid)
	if err != nil {
		return err
	}
	heap, err := e.heapInuse(ctx)
	if err != nil {
		return err
	}
	r.MemoryJobs, r.RSS, r.MemoryPeakRSS, r.Heap = len(all.Items)+n, u.rss, u.peakRSS, heap
	e.logf("memory: %d TrainJobs, RSS %d MiB (peak %d MiB; files mapped %d MiB, the rest anonymous), Go heap in use %d MiB",
		r.MemoryJobs, u.rss>>20, u.peakRSS>>20, u.rssFile>>20, heap>>20)
	if e.o.Profiles != "" && e.p.Trainer == platform.TrainerKiln {
		path := filepath.Join(e.o.Profiles, fmt.Sprintf("kiln-memory-run%d.heap", r.Run))
		if err := e.saveProfile(ctx, "heap", path); err != nil {
			return err
		}
		e.logf("memory: heap profile in %s (go tool pprof -top -inuse_space %s)", path, path)
	}
	return nil
}

// heapInuse is the controller's Go heap in use: Kiln's from its heap profile's MemStats
// (/debug/pprof/heap?debug=1), upstream's from its metrics (go_memstats_heap_inuse_bytes).
func (e *env) heapInuse(ctx context.Context) (int64, error) {
	url, key, sep := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", e.p.OperatorPprof), "# HeapInuse", " = "
	if e.p.Trainer == platform.TrainerUpstream {
		url, key, sep = fmt.Sprintf("http://127.0.0.1:%d/metrics", e.p.OperatorMetrics), "go_memstats_heap_inuse_bytes", " "
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the controller's heap: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading the controller's heap: %s from %s", resp.Status, url)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return heapFrom(string(body), key, sep)
}

// heapFrom finds the line "<key><sep><bytes>" in text.
func heapFrom(text, key, sep string) (int64, error) {
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+sep); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("%q: %w", strings.TrimSpace(line), err)
			}
			return int64(f), nil
		}
	}
	return 0, fmt.Errorf("no %q in the controller's answer", key)
}

// saveProfile saves the operator's profile named query (a path under /debug/pprof/ with
// its parameters: "heap", "profile?seconds=10") in path.
func (e *env) saveProfile(ctx context.Context, query, path string) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", e.p.OperatorPprof, query)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reading the operator's profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reading the operator's profile: %s from %s", resp.Status, url)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// unmanagedRuntime is torch-distributed with JobSets that the JobSet controller skips.
const unmanagedRuntime = "torch-distributed-unmanaged"

func (e *env) unmanagedRuntime(ctx context.Context) error {
	gvk := trainer.GroupVersion.WithKind(trainer.ClusterTrainingRuntimeKind)
	rt := platform.UnstructuredOf(gvk)
	if err := e.c.Get(ctx, client.ObjectKey{Name: "torch-distributed"}, rt); err != nil {
		return fmt.Errorf("reading the torch-distributed runtime: %w", err)
	}
	cp := platform.UnstructuredOf(gvk)
	cp.SetName(unmanagedRuntime)
	cp.SetLabels(rt.GetLabels())
	cp.Object["spec"] = runtimeDeepCopy(rt.Object)["spec"]
	if err := unstructured.SetNestedField(cp.Object, "bench.kiln.dev/nobody", "spec", "template", "spec", "managedBy"); err != nil {
		return err
	}
	if err := e.c.Create(ctx, cp); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the %s runtime: %w", unmanagedRuntime, err)
	}
	return nil
}
