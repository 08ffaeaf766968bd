// Package bench runs Kiln's operator and upstream Kubeflow Trainer, in turn, through the
// same scenarios on a fresh local platform each, and reports the figures side by side.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// Options shape a benchmark.
type Options struct {
	Root     string
	Trainers []platform.Trainer
	// Runs is how many times every scenario runs per controller; figures report
	// min/median/max over the runs.
	Runs int
	// Jobs is N for throughput, deadline and TTL precision.
	Jobs int
	// QueuedJobs go through Kueue for the admission and write-cost figures.
	QueuedJobs int
	// MemoryJobs is how many TrainJobs exist when memory is sampled; MemoryRuns is in how
	// many of the runs (the first ones) it is measured.
	MemoryJobs int
	MemoryRuns int
	// Deadline is the deadline scenario's activeDeadlineSeconds; TTL the
	// ttlSecondsAfterFinished those TrainJobs carry too, so that Kiln's TTL is measured on
	// them once they failed (upstream has no TTL and keeps them).
	Deadline time.Duration
	TTL      time.Duration
	// ProgressJobs trainers each post a progress report every ProgressInterval for
	// ProgressDuration to Kiln's status server, while TimerJobs deadlines of
	// TimerDeadline fall due (and, for the baseline, just before on the idle platform).
	ProgressJobs     int
	ProgressInterval time.Duration
	ProgressDuration time.Duration
	TimerJobs        int
	TimerDeadline    time.Duration
	// Scenarios limits the run to these scenarios (all when empty): admission, deadline
	// (with throughput and Kiln's TTL), limit and floor (need deadline), memory, progress.
	Scenarios []string
	// Budget is the client budget and parallelism both controllers get.
	Budget platform.ControllerBudget
	// MemoryBudget is the budget both controllers are restarted with for the memory
	// scenario, which times nothing: rendering 10,000 TrainJobs at Budget would take most
	// of the benchmark's time.
	MemoryBudget platform.ControllerBudget
	// PodsPerNode sizes the KWOK nodes so that every benchmark pod fits.
	PodsPerNode int
	// Audit logs the apiserver's writes in the Kueue and deadline scenarios' namespaces: the
	// report then says which component made each write of the Kueue scenario, and when the
	// apiserver answered the writes that carry out the deadlines and TTLs.
	Audit bool
	// Report is the markdown report's path; plots go beside it.
	Report string
	// MakeTarget is the make target the report says wrote it (bench, bench-quick).
	MakeTarget string
	// Profiles, when set, is a directory where the bench saves Kiln's operator's heap
	// profile at the memory sample and its CPU profiles over the throughput scenario's
	// submission and over the deadlines' first 20 seconds (go tool pprof reads them); the
	// deadline scenario then also logs its load second by second (loadBySecond).
	Profiles string
	Out      io.Writer
}

// DefaultOptions are what `make bench` runs.
func DefaultOptions(root string) Options {
	return Options{
		Root: root, Trainers: []platform.Trainer{platform.TrainerKiln, platform.TrainerUpstream},
		Runs: 3, Jobs: 1000, QueuedJobs: 64, MemoryJobs: 10000, MemoryRuns: 1,
		Deadline: 120 * time.Second, TTL: 30 * time.Second,
		ProgressJobs: 1000, ProgressInterval: time.Second, ProgressDuration: 2 * time.Minute, TimerJobs: 200, TimerDeadline: 30 * time.Second,
		Budget:       platform.ControllerBudget{QPS: 200, Burst: 400, Concurrency: 32},
		MemoryBudget: platform.ControllerBudget{QPS: 1000, Burst: 2000, Concurrency: 50},
		PodsPerNode:  500, Audit: true,
		Report: reportPath(root), MakeTarget: "bench",
		Out: os.Stdout,
	}
}

// reportPath is docs/benchmarks.md in the repository; empty until the root is known.
func reportPath(root string) string {
	if root == "" {
		return ""
	}
	return filepath.Join(root, "docs", "benchmarks.md")
}

// controllerScenarios are those that run for every controller in every run.
var controllerScenarios = []string{"admission", "deadline", "limit", "floor", "memory"}

func (o Options) wants(scenario string) bool {
	return len(o.Scenarios) == 0 || slices.Contains(o.Scenarios, scenario)
}

// Run runs every scenario for every controller and writes the report.
func Run(ctx context.Context, o Options) error {
	started := time.Now()
	var results []*runResult
	runs := o.Runs
	if !slices.ContainsFunc(controllerScenarios, o.wants) {
		runs = 0
	}
	for run := 1; run <= runs; run++ {
		trainers := o.Trainers
		if run%2 == 0 { // alternate the order, so that neither always runs on a warmer machine
			trainers = reversed(trainers)
		}
		for _, tr := range trainers {
			res, err := runOnce(ctx, o, tr, run)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", tr, run, err)
			}
			results = append(results, res)
		}
	}
	// Progress reports go to Kiln's status server only, on a platform of their own.
	var prog *progressResult
	if o.wants("progress") && slices.Contains(o.Trainers, platform.TrainerKiln) {
		var err error
		if prog, err = runProgress(ctx, o); err != nil {
			return fmt.Errorf("progress: %w", err)
		}
	}
	return writeReport(o, results, prog, started, time.Since(started))
}

func runProgress(ctx context.Context, o Options) (*progressResult, error) {
	fmt.Fprintln(o.Out, "progress: kiln on a fresh platform")
	e, stop, err := start(ctx, o, platform.TrainerKiln, "progress", false)
	if err != nil {
		return nil, err
	}
	defer stop()
	begin := time.Now()
	res, err := progress(ctx, e)
	if err == nil {
		e.logf("progress done in %s", time.Since(begin).Round(time.Second))
	}
	return res, err
}

func reversed[T any](s []T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// env is one controller's fresh platform and the bench's clients to it.
type env struct {
	o       Options
	p       *platform.Platform
	cfg     *rest.Config
	c       client.Client
	tracker *tracker
	cache   cache.Cache
	// rendered is a JobSet the controller rendered, the model of the limit's.
	rendered *unstructured.Unstructured
	// scrapeToken reads Kiln's operator's metrics (operatorMetrics).
	scrapeToken string
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.o.Out, "  [%s] %s\n", e.p.Trainer, fmt.Sprintf(format, args...))
}

// start starts a fresh platform for controller tr and the bench's clients to it; stop
// ends the bench's watches and stops the platform. name names its log; tweaks change the
// platform's configuration.
func start(ctx context.Context, o Options, tr platform.Trainer, name string, audit bool, tweaks ...func(*platform.Config)) (*env, func(), error) {
	cfg := platform.DefaultConfig(o.Root)
	cfg.Trainer, cfg.Controller, cfg.PodsPerNode, cfg.WithoutKilnAPIServer, cfg.WithoutTracing = tr, o.Budget, o.PodsPerNode, true, true
	// The bench's own trainers report where a scenario measures progress; nothing else may.
	cfg.SimulatedProgress = false
	// The scenarios run on the KWOK fleet; a real node would only take the apiserver's time,
	// and so would the topology-aware pool (make bench-placement measures it): Kueue's TAS
	// follows every pod's node (docs/performance.md, "Creating 1,000 JobSets").
	cfg.RealNodes, cfg.TASBlocks = 0, 0
	for _, t := range tweaks {
		t(&cfg)
	}
	if audit {
		cfg.AuditNamespaces = []string{queueNamespace, deadlineNamespace}
	}
	logs := filepath.Join(cfg.StateDir, "..", "bench")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, nil, err
	}
	plog, err := os.Create(filepath.Join(logs, fmt.Sprintf("platform-%s-%s.log", tr, name)))
	if err != nil {
		return nil, nil, err
	}
	p := &platform.Platform{Config: cfg, Out: plog}
	fail := func(err error) (*env, func(), error) {
		_ = p.Down(context.WithoutCancel(ctx))
		_ = plog.Close()
		return nil, nil, err
	}
	if err := p.Down(ctx); err != nil {
		return fail(err)
	}
	if err := p.Up(ctx); err != nil {
		return fail(fmt.Errorf("starting the platform (log %s): %w", plog.Name(), err))
	}
	ctx, cancel := context.WithCancel(ctx) // ends the bench's watches
	e, err := newEnv(ctx, o, p)
	if err != nil {
		cancel()
		return fail(err)
	}
	return e, func() {
		cancel()
		_ = p.Down(context.WithoutCancel(ctx))
		_ = plog.Close()
	}, nil
}

func runOnce(ctx context.Context, o Options, tr platform.Trainer, run int) (*runResult, error) {
	fmt.Fprintf(o.Out, "run %d/%d: %s on a fresh platform\n", run, o.Runs, tr)
	e, stop, err := start(ctx, o, tr, strconv.Itoa(run), o.Audit)
	if err != nil {
		return nil, err
	}
	defer stop()
	res := &runResult{Trainer: string(tr), Run: run}
	steps := []struct {
		name string
		do   func(context.Context, *env, *runResult) error
		when bool
	}{
		// Kueue's first, on the quiet platform: it counts every write the apiserver answers.
		{"admission", admission, true},
		{"deadline", deadlines, true},
		// The limit is the machine's, not a controller's: measured once per run.
		{"limit", limit, tr == platform.TrainerKiln},
		// The controller's CPU and peak RSS are read before the floor, which is no
		// controller's work and runs on Kiln's platform only (its operator still serves the
		// webhooks of the floor's creates and watches the limit's and the floor's objects go).
		{"usage", usage, true},
		{"floor", floor, tr == platform.TrainerKiln},
		{"memory", memory, run <= o.MemoryRuns},
	}
	for _, s := range steps {
		if !s.when || (s.name != "usage" && !o.wants(s.name)) {
			continue
		}
		begin := time.Now()
		if err := s.do(ctx, e, res); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		e.logf("%s done in %s", s.name, time.Since(begin).Round(time.Second))
	}
	return res, nil
}

// usage records the CPU time and peak RSS of the controller over the timed scenarios.
func usage(_ context.Context, e *env, r *runResult) error {
	proc := e.p.TrainerProcess()
	pid, running := proc.Running()
	if !running {
		return fmt.Errorf("%s is not running any more; its log: %s", proc.Name, proc.LogFile())
	}
	u, err := readProcUsage(pid)
	if err != nil {
		return err
	}
	r.PeakRSS, r.CPU = u.peakRSS, u.cpu
	return nil
}

func newEnv(ctx context.Context, o Options, p *platform.Platform) (*env, error) {
	cfg, err := p.RESTConfig()
	if err != nil {
		return nil, err
	}
	// The bench's own client must never be what limits a figure.
	cfg.QPS, cfg.Burst = 2000, 4000
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := trainer.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := kiln.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ca, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	t := newTracker()
	if err := t.start(ctx, ca); err != nil {
		return nil, err
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the bench's watches did not sync")
	}
	return &env{o: o, p: p, cfg: cfg, c: c, tracker: t, cache: ca}, nil
}

// waitWhileProgressing polls cond until it holds, for as long as it makes progress: it
// times out only when cond's progress has not grown for stall. A slow controller that keeps
// going (upstream's rendering 50,000 TrainJobs in a slow hour) is waited for; a stuck one
// is not.
func waitWhileProgressing(ctx context.Context, stall time.Duration, what string, cond func() (done bool, progress int, state string)) error {
	best, since := -1, time.Now()
	return poll(ctx, func() (bool, error) {
		ok, progress, state := cond()
		switch {
		case ok:
			return true, nil
		case progress > best:
			best, since = progress, time.Now()
		case time.Since(since) > stall:
			return false, fmt.Errorf("gave up waiting for %s: no progress for %s (%s)", what, stall, state)
		}
		return false, nil
	})
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	return poll(ctx, func() (bool, error) {
		ok, state := cond()
		if !ok && time.Now().After(deadline) {
			return false, fmt.Errorf("timed out after %s waiting for %s (%s)", timeout, what, state)
		}
		return ok, nil
	})
}

// poll calls check every 100 ms until it is done or fails, or ctx ends.
func poll(ctx context.Context, check func() (done bool, err error)) error {
	for {
		if done, err := check(); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
