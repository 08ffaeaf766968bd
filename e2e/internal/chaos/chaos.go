// Package chaos kills the platform's components (Kiln's operator and API server, JobSet and
// Kueue) with SIGKILL at random instants while TrainJobs with deadlines and TTLs run and
// submissions go through the API server with retries, then checks that nothing was missed,
// doubled or lost: every deadline fired once, every TTL deleted its job once, no JobSet of a
// job was created twice, every submission created exactly one job, and no invalid TrainJob
// got in while a webhook was down.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/internal/stats"
)

// Options shape a run.
type Options struct {
	// Jobs are created directly, half ending by their deadline, half completing; all are
	// deleted by their TTL.
	Jobs int
	// Submissions go through the API server, each retried with its request id until it is
	// answered.
	Submissions int
	// Kills are spread over the run, one component at a time, at random instants.
	Kills int
	// Components are the ones killed (platform.Components by default).
	Components []string
	// Span is the time over which the kills and the submissions are spread (40 s if 0).
	Span time.Duration
	// Seed makes the choice of components and instants repeatable.
	Seed uint64
	// Timeout bounds the whole run.
	Timeout time.Duration
	Out     io.Writer
}

// Result holds a run's figures.
type Result struct {
	Jobs, Deadlines, TTLs                                      int
	Kills                                                      map[string]int
	MissedDeadlines, DoubledDeadlines, MissedTTLs, DoubledTTLs int
	RecreatedJobSets                                           int
	Submissions, SubmitRetries, Replayed, Lost, Duplicated     int
	InvalidAttempts, InvalidAdmitted                           int
	Start                                                      time.Time
	Took                                                       time.Duration
	Failures                                                   []string
	// Timers: for each deadline and TTL, from the instant it was due (status.startTime +
	// activeDeadlineSeconds, status.completionTime + ttlSecondsAfterFinished, whole
	// seconds of the API) to the instant the run saw it act (Failed/DeadlineExceeded, the
	// TrainJob deleting).
	Timers []Timer
	// Waits is, per job, creation to status.startTime: time in Kueue's queue (the
	// deadline counts from the start).
	Waits []time.Duration
	// Outages are the intervals each component was down: killed until ready again.
	Outages []Outage
}

// Timer is one deadline or TTL of a run's job.
type Timer struct {
	Job       string
	Kind      string // "deadline" or "ttl"
	Due, Seen time.Time
}

// Lag is how late the timer acted.
func (t Timer) Lag() time.Duration { return t.Seen.Sub(t.Due) }

// Outage is a component down from its kill until it was ready again.
type Outage struct {
	Component  string
	Down, Back time.Time
}

// Lags are the lags of the timers of a kind.
func (r *Result) Lags(kind string) []time.Duration {
	var out []time.Duration
	for _, t := range r.Timers {
		if t.Kind == kind {
			out = append(out, t.Lag())
		}
	}
	return out
}

// Late are the timers more than d late, each with the outages of the operator from
// before it was due until it acted (restarting, the operator lists everything and
// requeues every timer): why it was late, if that is why.
func (r *Result) Late(d time.Duration) (late []Timer, inOutage int) {
	for _, t := range r.Timers {
		if t.Lag() <= d {
			continue
		}
		late = append(late, t)
		for _, o := range r.Outages {
			if o.Component == platform.ComponentOperator && o.Down.Before(t.Seen) && o.Back.After(t.Due.Add(-time.Second)) {
				inOutage++
				break
			}
		}
	}
	return late, inOutage
}

// OK is true when nothing was missed, doubled, lost or let in.
func (r *Result) OK() bool { return len(r.Failures) == 0 }

const (
	// runLabel marks every object of a run, with the run's id.
	runLabel   = "chaos.kiln.dev/run"
	simManager = "chaos.kiln.dev/simulation"
)

// Run runs the workload on the platform p (up, installed as processes), killing and
// restarting its components meanwhile.
func Run(ctx context.Context, p *platform.Platform, o Options) (*Result, error) {
	if p.Install == platform.InstallChart {
		return nil, errors.New("chaos kills the platform's processes: run it with KILN_INSTALL=processes")
	}
	if o.Jobs < 2 || o.Submissions < 0 || o.Kills < 0 {
		return nil, fmt.Errorf("chaos needs at least 2 jobs (one of each kind), and no negative submissions or kills (jobs %d, submissions %d, kills %d)", o.Jobs, o.Submissions, o.Kills)
	}
	if len(o.Components) == 0 {
		o.Components = platform.Components
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	start := time.Now()
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	run := fmt.Sprintf("%x", rng.Uint32())
	w, err := newWorld(ctx, p, run)
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "[chaos %s +%s] %s\n", run, time.Since(start).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
	}
	res := &Result{Kills: map[string]int{}, Start: start}

	// The jobs: i even ends by its deadline (its pod would run for an hour), i odd completes
	// after 3 to 12 s. Every one has a TTL of 5 s.
	ns := platform.DefaultNamespace
	jobs := make([]*trainer.TrainJob, o.Jobs)
	for i := range jobs {
		deadline := i%2 == 0
		run := fmt.Sprintf("%ds", 3+rng.IntN(10))
		if deadline {
			run = "1h"
		}
		tj := job(ns, fmt.Sprintf("chaos-%s-%03d", w.run, i), run, w.run)
		tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](5)
		if deadline {
			tj.Spec.ActiveDeadlineSeconds = ptr.To(int64(10 + rng.IntN(20)))
			res.Deadlines++
		} else {
			res.TTLs++
		}
		jobs[i] = tj
	}
	res.Jobs = len(jobs)

	// The kill instants, spread over the time the jobs take to finish.
	span := o.Span
	if span == 0 {
		span = 40 * time.Second
	}
	instants := make([]time.Duration, o.Kills)
	for i := range instants {
		instants[i] = time.Duration(rng.Int64N(int64(span)))
	}
	sort.Slice(instants, func(i, j int) bool { return instants[i] < instants[j] })
	victims := make([]string, o.Kills)
	for i := range victims {
		victims[i] = o.Components[rng.IntN(len(o.Components))]
	}

	var wg sync.WaitGroup
	var killErr error
	wg.Go(func() {
		begin := time.Now()
		for i, at := range instants {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(begin.Add(at))):
			}
			name := victims[i]
			if err := p.Kill(ctx, name); err != nil {
				killErr = err
				return
			}
			res.Kills[name]++
			down := time.Now()
			if err := p.Restart(ctx, name); err != nil {
				killErr = fmt.Errorf("restarting %s: %w", name, err)
				return
			}
			res.Outages = append(res.Outages, Outage{Component: name, Down: down, Back: time.Now()})
			logf("killed %s (SIGKILL), ready again in %s", name, time.Since(down).Round(10*time.Millisecond))
		}
	})
	var submitErr error
	wg.Go(func() { submitErr = w.submit(ctx, o.Submissions, span, res) })
	stopInvalid := make(chan struct{})
	var invalidWG sync.WaitGroup
	invalidWG.Go(func() { w.tryInvalid(ctx, ns, stopInvalid, res) })
	for _, tj := range jobs {
		if err := createRetrying(ctx, w.c, tj); err != nil {
			return nil, err
		}
	}
	logf("%d jobs created (%d with deadlines), %d submissions under way, %d kills planned over %s", len(jobs), res.Deadlines, o.Submissions, o.Kills, span)
	wg.Wait()
	close(stopInvalid)
	invalidWG.Wait()
	if killErr != nil {
		return nil, killErr
	}
	if submitErr != nil {
		return nil, submitErr
	}

	// Every job finished and deleted by its TTL.
	logf("kills done; waiting for every job to finish and be deleted")
	for {
		left := w.pending(jobs)
		if left == 0 {
			break
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	w.check(context.WithoutCancel(ctx), jobs, res)
	res.Took = time.Since(start)
	// The submissions' jobs (TTL 60 s) go now: the platform may serve other tests next.
	if err := w.c.DeleteAllOf(context.WithoutCancel(ctx), &trainer.TrainJob{}, client.InNamespace(w.ns), client.MatchingLabels{runLabel: w.run}); err != nil {
		return nil, fmt.Errorf("deleting the run's jobs: %w", err)
	}
	logf("done in %s: %s", res.Took.Round(time.Second), res.Summary())
	return res, nil
}

// Summary is a line of the figures.
func (r *Result) Summary() string {
	var kills []string
	total := 0
	for _, c := range platform.Components {
		if n := r.Kills[c]; n > 0 {
			kills = append(kills, fmt.Sprintf("%s %d", c, n))
			total += n
		}
	}
	return fmt.Sprintf("%d jobs (%d deadlines, %d completions), %d kills (%s); deadlines missed %d, doubled %d; TTLs missed %d, doubled %d; JobSets recreated %d; %d submissions (%d retries, %d replayed): lost %d, duplicated %d; invalid TrainJobs admitted %d of %d",
		r.Jobs, r.Deadlines, r.TTLs, total, strings.Join(kills, ", "), r.MissedDeadlines, r.DoubledDeadlines, r.MissedTTLs, r.DoubledTTLs,
		r.RecreatedJobSets, r.Submissions, r.SubmitRetries, r.Replayed, r.Lost, r.Duplicated, r.InvalidAdmitted, r.InvalidAttempts) +
		fmt.Sprintf("; deadlines acted %s after due, TTLs %s; queued before starting %s",
			Spread(r.Lags("deadline")), Spread(r.Lags("ttl")), Spread(r.Waits))
}

// Spread is p50, p99 and max of ds.
func Spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "(none)"
	}
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	return fmt.Sprintf("p50 %s, p99 %s, max %s", r(stats.Percentile(ds, 50)), r(stats.Percentile(ds, 99)), r(stats.Percentile(ds, 100)))
}

// world is the run's clients and what its watches saw.
type world struct {
	run string
	c   client.Client
	api kilnv1connect.TrainJobServiceClient
	ns  string

	mu sync.Mutex
	// deleted: when a TrainJob was first seen deleted (or deleting); deadlineAt: when
	// DeadlineExceeded was first seen. deadlineDue and ttlDue: when they were due, by the
	// TrainJob's status as seen then; started: its first status.startTime.
	deleted     map[string]time.Time
	deadlineAt  map[string]time.Time
	deadlineDue map[string]time.Time
	ttlDue      map[string]time.Time
	started     map[string]time.Time
	// jobSetUIDs: every UID a JobSet of the run had (more than one: created twice).
	jobSetUIDs map[string]map[types.UID]bool
	// byRequest: the UIDs of the TrainJobs each submission's request id created.
	byRequest map[string]map[types.UID]bool
}

func newWorld(ctx context.Context, p *platform.Platform, run string) (*world, error) {
	cfg, err := p.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	api, kc, err := p.TrainJobAPI()
	if err != nil {
		return nil, err
	}
	w := &world{
		run: run, c: c, api: api, ns: kc.Namespace,
		deleted: map[string]time.Time{}, deadlineAt: map[string]time.Time{}, deadlineDue: map[string]time.Time{},
		ttlDue: map[string]time.Time{}, started: map[string]time.Time{}, jobSetUIDs: map[string]map[types.UID]bool{},
		byRequest: map[string]map[types.UID]bool{},
	}
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	tjInf, err := ca.GetInformer(ctx, &trainer.TrainJob{})
	if err != nil {
		return nil, err
	}
	jsInf, err := ca.GetInformer(ctx, platform.UnstructuredOf(platform.JobSetGVK))
	if err != nil {
		return nil, err
	}
	if _, err := tjInf.AddEventHandler(platform.EventHandlers(w.onTrainJob)); err != nil {
		return nil, err
	}
	if _, err := jsInf.AddEventHandler(platform.EventHandlers(w.onJobSet)); err != nil {
		return nil, err
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return nil, errors.New("the chaos run's watches did not sync")
	}
	return w, nil
}

func (w *world) onTrainJob(obj any, deleted bool) {
	now := time.Now()
	tj, ok := obj.(*trainer.TrainJob)
	if !ok || tj.Labels[runLabel] != w.run {
		return
	}
	key := tj.Namespace + "/" + tj.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	if id := tj.Annotations["kiln.dev/request-id"]; id != "" {
		if w.byRequest[id] == nil {
			w.byRequest[id] = map[types.UID]bool{}
		}
		w.byRequest[id][tj.UID] = true
	}
	if deleted || tj.DeletionTimestamp != nil {
		if _, ok := w.deleted[key]; !ok {
			w.deleted[key] = now
		}
		return
	}
	if tj.Status.StartTime != nil {
		if _, ok := w.started[key]; !ok {
			w.started[key] = tj.Status.StartTime.Time
		}
	}
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed); c != nil && c.Status == metav1.ConditionTrue && c.Reason == trainer.TrainJobDeadlineExceededReason {
		if _, ok := w.deadlineAt[key]; !ok {
			w.deadlineAt[key] = now
			if tj.Status.StartTime != nil && tj.Spec.ActiveDeadlineSeconds != nil {
				w.deadlineDue[key] = tj.Status.StartTime.Add(time.Duration(*tj.Spec.ActiveDeadlineSeconds) * time.Second)
			}
		}
	}
	if tj.Status.CompletionTime != nil && tj.Spec.TTLSecondsAfterFinished != nil {
		w.ttlDue[key] = tj.Status.CompletionTime.Add(time.Duration(*tj.Spec.TTLSecondsAfterFinished) * time.Second)
	}
}

func (w *world) onJobSet(obj any, deleted bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || deleted || u.GetLabels()[runLabel] != w.run {
		return
	}
	key := u.GetNamespace() + "/" + u.GetName()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.jobSetUIDs[key] == nil {
		w.jobSetUIDs[key] = map[types.UID]bool{}
	}
	w.jobSetUIDs[key][u.GetUID()] = true
}

// pending is how many jobs are not deleted yet.
func (w *world) pending(jobs []*trainer.TrainJob) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, tj := range jobs {
		if _, ok := w.deleted[tj.Namespace+"/"+tj.Name]; !ok {
			n++
		}
	}
	return n
}

// job is a one-node TrainJob on torch-distributed whose KWOK pod runs for podRun; it and
// its JobSet carry the run's label.
func job(ns, name, podRun, run string) *trainer.TrainJob {
	sim := platform.SimulatedPods(simManager, "node", map[string]string{platform.AnnotationSimDuration: podRun})
	sim.TrainingRuntimeSpec.Template.Metadata = &metav1.ObjectMeta{Labels: map[string]string{runLabel: run}}
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{runLabel: run}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef:     trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer:        &trainer.Trainer{Image: ptr.To("docker.io/chaos/train:latest"), Command: []string{"torchrun", "train.py"}, NumNodes: ptr.To[int32](1)},
			RuntimePatches: []trainer.RuntimePatch{sim},
		},
	}
}

// createRetrying creates obj, retrying while a webhook is down (its component killed).
func createRetrying(ctx context.Context, c client.Client, obj client.Object) error {
	for {
		err := c.Create(ctx, obj)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// submit sends n CreateTrainJob requests through the API server from 8 callers, spread
// evenly over span (so that they meet the kills), each retried with its request id until
// the server answers it.
func (w *world) submit(ctx context.Context, n int, span time.Duration, res *Result) error {
	begin := time.Now()
	var next, retries, replayed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				time.Sleep(time.Until(begin.Add(time.Duration(i) * span / time.Duration(n))))
				tj := job("", "", "2s", w.run)
				tj.GenerateName = "chaos-sub-"
				tj.Name = ""
				tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
				tj.APIVersion, tj.Kind = trainer.GroupVersion.String(), "TrainJob"
				manifest, err := yaml.Marshal(tj)
				if err != nil {
					errs <- err
					return
				}
				req := &kilnv1.CreateTrainJobRequest{Namespace: w.ns, Source: &kilnv1.CreateTrainJobRequest_Manifest{Manifest: string(manifest)},
					RequestId: fmt.Sprintf("chaos-%s-%04d", w.run, i)}
				for attempt := 0; ; attempt++ {
					resp, err := w.api.CreateTrainJob(ctx, connect.NewRequest(req))
					if err == nil {
						if resp.Msg.GetReplayed() {
							replayed.Add(1)
						}
						break
					}
					if ctx.Err() != nil {
						errs <- fmt.Errorf("submission %s: %w", req.RequestId, err)
						return
					}
					switch connect.CodeOf(err) {
					case connect.CodeInvalidArgument, connect.CodePermissionDenied, connect.CodeAlreadyExists, connect.CodeFailedPrecondition:
						errs <- fmt.Errorf("submission %s refused: %w", req.RequestId, err)
						return
					}
					retries.Add(1)
					time.Sleep(time.Duration(100+50*min(attempt, 10)) * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	res.Submissions, res.SubmitRetries, res.Replayed = n, int(retries.Load()), int(replayed.Load())
	return <-errs
}

// tryInvalid keeps creating a TrainJob that only Kiln's webhook refuses (its runtime does
// not exist) until stop: with the webhook's failurePolicy Fail, none gets in while the
// operator is down either.
func (w *world) tryInvalid(ctx context.Context, ns string, stop <-chan struct{}, res *Result) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
		tj := job(ns, fmt.Sprintf("chaos-%s-invalid-%04d", w.run, i), "1s", w.run)
		tj.Spec.RuntimeRef.Name = "no-such-runtime"
		err := w.c.Create(ctx, tj, client.DryRunAll)
		res.InvalidAttempts++
		if err == nil {
			res.InvalidAdmitted++
		}
	}
}

// check counts what was missed, doubled or lost.
func (w *world) check(ctx context.Context, jobs []*trainer.TrainJob, res *Result) {
	fail := func(format string, args ...any) { res.Failures = append(res.Failures, fmt.Sprintf(format, args...)) }
	// Events: DeadlineExceeded and TTLExpired, by the TrainJob they are about.
	events := &eventsv1.EventList{}
	counts := map[string]map[string]int{}
	if err := w.c.List(ctx, events, client.InNamespace(jobs[0].Namespace)); err != nil {
		fail("listing events: %v", err)
	}
	for _, e := range events.Items {
		if e.Regarding.Kind != "TrainJob" || !strings.HasPrefix(e.Regarding.Name, "chaos-"+w.run+"-") {
			continue
		}
		n := 1
		if e.Series != nil {
			n = int(e.Series.Count)
		} else if e.DeprecatedCount > 1 {
			n = int(e.DeprecatedCount)
		}
		if counts[e.Regarding.Name] == nil {
			counts[e.Regarding.Name] = map[string]int{}
		}
		counts[e.Regarding.Name][e.Reason] += n
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, tj := range jobs {
		key := tj.Namespace + "/" + tj.Name
		c := counts[tj.Name]
		if tj.Spec.ActiveDeadlineSeconds != nil {
			if _, ok := w.deadlineAt[key]; !ok {
				res.MissedDeadlines++
				fail("%s: its deadline never fired", tj.Name)
			}
			if c[trainer.TrainJobDeadlineExceededReason] > 1 {
				res.DoubledDeadlines++
				fail("%s: DeadlineExceeded recorded %d times", tj.Name, c[trainer.TrainJobDeadlineExceededReason])
			}
		}
		if at, ok := w.deadlineAt[key]; ok && !w.deadlineDue[key].IsZero() {
			res.Timers = append(res.Timers, Timer{Job: tj.Name, Kind: "deadline", Due: w.deadlineDue[key], Seen: at})
		}
		if start, ok := w.started[key]; ok {
			res.Waits = append(res.Waits, start.Sub(tj.CreationTimestamp.Time))
		}
		if at, ok := w.deleted[key]; !ok {
			res.MissedTTLs++
			fail("%s: its TTL never deleted it", tj.Name)
		} else if due, ok := w.ttlDue[key]; ok {
			res.Timers = append(res.Timers, Timer{Job: tj.Name, Kind: "ttl", Due: due, Seen: at})
		}
		if c["TTLExpired"] > 1 {
			res.DoubledTTLs++
			fail("%s: TTLExpired recorded %d times", tj.Name, c["TTLExpired"])
		}
	}
	for key, uids := range w.jobSetUIDs {
		if len(uids) > 1 {
			res.RecreatedJobSets++
			fail("JobSet %s was created %d times", key, len(uids))
		}
	}
	for i := range res.Submissions {
		id := fmt.Sprintf("chaos-%s-%04d", w.run, i)
		switch n := len(w.byRequest[id]); {
		case n == 0:
			res.Lost++
			fail("submission %s created no TrainJob", id)
		case n > 1:
			res.Duplicated++
			fail("submission %s created %d TrainJobs", id, n)
		}
	}
	if res.InvalidAdmitted > 0 {
		fail("%d invalid TrainJobs were admitted while components were down", res.InvalidAdmitted)
	}
}
