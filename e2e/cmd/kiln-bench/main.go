// Command kiln-bench runs Kiln's operator and upstream Kubeflow Trainer through the same
// scenarios, each on a fresh local platform, and writes a markdown report with plots
// (docs/benchmarks.md by default). `make bench` runs it; it stops any local platform
// that runs, and leaves none running.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kiln-ml/kiln/e2e/internal/bench"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kiln-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	root := flag.String("root", "", "repository root (default: the nearest directory with go.work)")
	suite := flag.String("suite", "all", "controllers (Kiln vs upstream Trainer), api (Kiln's API server vs direct Kubernetes), placement (gang jobs with and without Kueue's TAS), pods (real pods on the real node, Kiln vs upstream), or all")
	pdo := bench.DefaultPodsOptions("")
	flag.IntVar(&pdo.Jobs, "pods-jobs", pdo.Jobs, "2-node torch jobs per variant and controller of the pods suite")
	podsVariants := flag.String("pods-variants", strings.Join(pdo.Variants, ","), "variants of the pods suite, in order: direct, kueue, function (the Python SDK's function trainer)")
	podsReport := flag.String("pods-report", "", "the pods suite's report (default: benchmarks-pods.md beside --report)")
	po := bench.DefaultPlacementOptions("")
	flag.IntVar(&po.Runs, "placement-runs", po.Runs, "runs of the placement suite (both variants each)")
	flag.IntVar(&po.Jobs, "placement-jobs", po.Jobs, "gang jobs per variant and run of the placement suite")
	flag.DurationVar(&po.PodRun, "placement-pod-run", po.PodRun, "how long each pod of the placement suite runs")
	o := bench.DefaultOptions("")
	ao := bench.DefaultAPIOptions("")
	flag.IntVar(&ao.Runs, "api-runs", ao.Runs, "runs of the API suite")
	flag.IntVar(&ao.Creates, "api-creates", ao.Creates, "TrainJobs each path creates in the API suite")
	flag.IntVar(&ao.Concurrency, "api-concurrency", ao.Concurrency, "concurrent callers of the API suite's Get and List loads")
	flag.DurationVar(&ao.Duration, "api-duration", ao.Duration, "how long each Get and List load lasts")
	flag.IntVar(&ao.ScaleJobs, "api-scale-jobs", 0, "add a run of the API suite with this many TrainJobs in one namespace (0: none)")
	apiReport := flag.String("api-report", "", "the API suite's report (default: benchmarks-api.md beside --report)")
	trainers := flag.String("trainers", "kiln,upstream", "controllers to measure, in order: kiln, upstream")
	flag.IntVar(&o.Runs, "runs", o.Runs, "runs per controller; each figure reports min/median/max over them")
	flag.IntVar(&o.Jobs, "jobs", o.Jobs, "TrainJobs for the throughput, deadline and TTL figures")
	flag.IntVar(&o.QueuedJobs, "queued-jobs", o.QueuedJobs, "TrainJobs sent through Kueue for the admission and write-cost figures")
	flag.IntVar(&o.MemoryJobs, "memory-jobs", o.MemoryJobs, "TrainJobs that exist when memory is sampled")
	flag.IntVar(&o.MemoryRuns, "memory-runs", o.MemoryRuns, "in how many runs memory is measured (it is the slowest scenario)")
	flag.DurationVar(&o.Deadline, "deadline", o.Deadline, "activeDeadlineSeconds of the deadline scenario (whole seconds)")
	flag.DurationVar(&o.TTL, "ttl", o.TTL, "ttlSecondsAfterFinished the deadline scenario's TrainJobs carry, for Kiln's TTL figure (whole seconds)")
	flag.Float64Var(&o.Budget.QPS, "qps", o.Budget.QPS, "client QPS both controllers get")
	flag.IntVar(&o.Budget.Burst, "burst", o.Budget.Burst, "client burst both controllers get")
	flag.IntVar(&o.Budget.Concurrency, "concurrency", o.Budget.Concurrency, "TrainJobs both controllers reconcile in parallel")
	flag.Float64Var(&o.MemoryBudget.QPS, "memory-qps", o.MemoryBudget.QPS, "client QPS both controllers are restarted with for the memory scenario")
	flag.IntVar(&o.MemoryBudget.Burst, "memory-burst", o.MemoryBudget.Burst, "client burst both controllers are restarted with for the memory scenario")
	flag.IntVar(&o.ProgressJobs, "progress-jobs", o.ProgressJobs, "trainers that report progress to Kiln's status server in the progress scenario")
	flag.DurationVar(&o.ProgressInterval, "progress-interval", o.ProgressInterval, "how often each of them posts a report")
	flag.DurationVar(&o.ProgressDuration, "progress-duration", o.ProgressDuration, "how long they report")
	flag.IntVar(&o.TimerJobs, "timer-jobs", o.TimerJobs, "deadlines that fall due during the progress load (and, for the baseline, before it)")
	flag.DurationVar(&o.TimerDeadline, "timer-deadline", o.TimerDeadline, "their activeDeadlineSeconds (whole seconds)")
	scenarios := flag.String("scenarios", "", "comma-separated subset of: admission, deadline (with throughput and Kiln's TTL), limit and floor (need deadline; floor is not in bench-quick), memory, progress (Kiln's status server, once, on a platform of its own)")
	flag.BoolVar(&o.Audit, "audit", o.Audit, "audit the apiserver's writes in the Kueue and deadline scenarios: report which component made each of the first's, and time the timers' actions to the apiserver's answers")
	flag.StringVar(&o.Report, "report", o.Report, "markdown report to write; plots go in the directory of the same name")
	flag.StringVar(&o.Profiles, "profiles", o.Profiles, "directory where Kiln's operator's profiles are saved: its heap at the memory sample, its CPU over the throughput scenario's submission and over the deadlines' first 20 seconds; the deadline scenario then also logs the apiserver's writes and the cores busy second by second while the deadlines fire (none when empty)")
	flag.StringVar(&o.MakeTarget, "make-target", o.MakeTarget, "the make target the controllers' report says wrote it")
	flag.Parse()
	dir, err := platform.RepoRoot(*root)
	if err != nil {
		return err
	}
	o.Root, ao.Root, po.Root, pdo.Root = dir, dir, dir, dir
	if o.Report == "" {
		o.Report = filepath.Join(dir, "docs", "benchmarks.md")
	}
	ao.Report = filepath.Join(filepath.Dir(o.Report), "benchmarks-api.md")
	if *apiReport != "" {
		ao.Report = *apiReport
	}
	if ao.Runs < 0 || ao.ScaleJobs < 0 || ao.Runs == 0 && ao.ScaleJobs == 0 {
		return fmt.Errorf("--api-runs and --api-scale-jobs: want non-negative numbers, at least one of them above 0")
	}
	po.Report = filepath.Join(filepath.Dir(o.Report), "benchmarks-placement.md")
	pdo.Report = filepath.Join(filepath.Dir(o.Report), "benchmarks-pods.md")
	if *podsReport != "" {
		pdo.Report = *podsReport
	}
	pdo.Variants = strings.Split(*podsVariants, ",")
	for _, v := range pdo.Variants {
		if !slices.Contains([]string{"direct", "kueue", "function"}, v) {
			return fmt.Errorf("--pods-variants: %q: want direct, kueue or function", v)
		}
	}
	if !slices.Contains([]string{"all", "controllers", "api", "placement", "pods"}, *suite) {
		return fmt.Errorf("--suite=%q: want controllers, api, placement, pods or all", *suite)
	}
	o.Trainers = nil
	for _, t := range strings.Split(*trainers, ",") {
		switch tr := platform.Trainer(strings.TrimSpace(t)); tr {
		case platform.TrainerKiln, platform.TrainerUpstream:
			o.Trainers = append(o.Trainers, tr)
		default:
			return fmt.Errorf("--trainers: unknown controller %q (want kiln or upstream)", t)
		}
	}
	pdo.Trainers = o.Trainers
	if *scenarios != "" {
		o.Scenarios = strings.Split(*scenarios, ",")
	}
	if o.Runs < 1 || o.Jobs < 1 || o.QueuedJobs < 1 || o.ProgressJobs < 1 || o.TimerJobs < 1 {
		return fmt.Errorf("--runs, --jobs, --queued-jobs, --progress-jobs and --timer-jobs must be at least 1")
	}
	if o.ProgressInterval < time.Second || o.ProgressDuration < o.ProgressInterval {
		return fmt.Errorf("--progress-interval must be at least 1s and --progress-duration at least one interval")
	}
	// The bench's watches log through controller-runtime and klog; their noise (a watch
	// that ends when a platform stops) is not the bench's output.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *suite == "all" || *suite == "controllers" {
		if err := bench.Run(ctx, o); err != nil {
			return err
		}
		fmt.Println("report:", o.Report)
	}
	if *suite == "all" || *suite == "api" {
		if err := bench.RunAPI(ctx, ao); err != nil {
			return err
		}
		fmt.Println("report:", ao.Report)
	}
	if *suite == "all" || *suite == "placement" {
		if err := bench.RunPlacement(ctx, po); err != nil {
			return err
		}
		fmt.Println("report:", po.Report)
	}
	if *suite == "all" || *suite == "pods" {
		if err := bench.RunPods(ctx, pdo); err != nil {
			return err
		}
		fmt.Println("report:", pdo.Report)
	}
	return nil
}
