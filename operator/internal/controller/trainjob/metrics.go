package trainjob

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Metrics: the operator's own Prometheus metrics, served with controller-runtime's on the
// manager's metrics endpoint. Every metric is named kiln_*, in base units (seconds), and
// labelled only with bounded sets (a state, a runtime, a reason the code or a runtime's
// author names): never a job's name or namespace. docs/observability.md lists them.
//
// Counters and histograms count what this process did since it started (Prometheus'
// rate() and increase() absorb a restart); the kiln_trainjobs gauge is computed from the
// cache at every scrape, so it is right from the first scrape after a restart.

// Job states, as `kiln list` shows them (apiserver/internal/view.State) but computed from
// the status alone: the status is what a reconcile writes, so a transition is counted once,
// by the reconcile whose write made it.
const (
	StateQueued    = "queued"
	StateSuspended = "suspended"
	StateStarting  = "starting"
	StateRunning   = "running"
	StateComplete  = "complete"
	StateFailed    = "failed"
)

var allStates = []string{StateQueued, StateSuspended, StateStarting, StateRunning, StateComplete, StateFailed}

// Timers whose lag kiln_trainjob_timer_lag_seconds measures.
const (
	TimerDeadline = "deadline"
	TimerTTL      = "ttl"
)

// Reasons of kiln_trainjob_jobset_errors_total.
const (
	errorRuntimeNotFound = "runtime_not_found"
	errorRender          = "render"
	errorRejected        = "rejected"
	errorApply           = "apply"
	errorOther           = "other"
)

var (
	trainJobsDesc = prometheus.NewDesc("kiln_trainjobs",
		"TrainJobs managed by Kiln, by state and runtime (computed from the operator's cache at each scrape).",
		[]string{"state", "runtime"}, nil)

	stateTransitions = counterVec("kiln_trainjob_transitions_total",
		"TrainJobs that entered a state (queued, suspended, starting, running, complete, failed), by state and runtime.",
		"state", "runtime")

	deadlinesExceeded = counterVec("kiln_trainjob_deadlines_exceeded_total",
		"TrainJobs failed by their activeDeadlineSeconds, by runtime.",
		"runtime")

	ttlDeletions = counterVec("kiln_trainjob_ttl_deletions_total",
		"Finished TrainJobs deleted by their ttlSecondsAfterFinished, by runtime.",
		"runtime")

	timerLag = histogramVec("kiln_trainjob_timer_lag_seconds",
		"From the instant a deadline or TTL fell due to the operator acting on it (the job's Failed status stored, or its deletion issued), by timer.",
		[]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		"timer")

	queued = histogramVec("kiln_trainjob_queued_seconds",
		"How long a TrainJob waited suspended (in its Kueue queue, or by a user's suspend) before it was admitted or resumed, by runtime.",
		[]float64{0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400},
		"runtime")

	startup = histogramVec("kiln_trainjob_startup_seconds",
		"From a TrainJob's admission (status.startTime) to its first pods ready, by runtime.",
		[]float64{0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800},
		"runtime")

	restarts = counterVec("kiln_trainjob_restarts_total",
		"Restarts of a TrainJob's pods (the JobSet's failure policy), by reason (the runtime's rule, or Failure) and whether they counted against maxRestarts.",
		"reason", "counted")

	jobSetErrors = counterVec("kiln_trainjob_jobset_errors_total",
		"Reconciles that could not bring a TrainJob's JobSet in line, by reason: runtime_not_found, render, rejected (for good), apply (retried), other.",
		"reason")
)

// counted are the metrics the TrainJob controller updates (kiln_trainjobs is the stateCollector's).
var counted = []prometheus.Collector{stateTransitions, deadlinesExceeded, ttlDeletions, timerLag, queued, startup, restarts, jobSetErrors}

func init() {
	ctrlmetrics.Registry.MustRegister(counted...)
}

// Metrics are every metric the TrainJob controller serves, kiln_trainjobs included.
func Metrics() []prometheus.Collector {
	return append(slices.Clone(counted), stateCollector{})
}

// counterVec is a counter by these labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// histogramVec is a histogram with these buckets by these labels.
func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// jobState is the state a TrainJob's status puts it in; "" for a job no reconcile wrote yet.
func jobState(tj *trainer.TrainJob, st *trainer.TrainJobStatus) string {
	switch {
	case meta.IsStatusConditionTrue(st.Conditions, trainer.TrainJobComplete):
		return StateComplete
	case meta.IsStatusConditionTrue(st.Conditions, trainer.TrainJobFailed):
		return StateFailed
	case meta.IsStatusConditionTrue(st.Conditions, trainer.TrainJobSuspended):
		if tj.Labels[trainer.KueueQueueNameLabel] != "" {
			return StateQueued
		}
		return StateSuspended
	case len(st.Conditions) == 0 && st.StartTime == nil:
		return ""
	}
	if podsReady(st) {
		return StateRunning
	}
	return StateStarting
}

// observeWrite counts what a stored status change did: the state entered (with how long the
// job had been queued, or how long its pods took to start), the restarts it reports, and a
// deadline that fired (with its lag).
func observeWrite(tj *trainer.TrainJob, before, after *trainer.TrainJobStatus, acts lifecycleActions, now time.Time) {
	rt := tj.Spec.RuntimeRef.Name
	from, to := jobState(tj, before), jobState(tj, after)
	if from != to && to != "" {
		stateTransitions.WithLabelValues(to, rt).Inc()
		if from == StateQueued || from == StateSuspended {
			if c := meta.FindStatusCondition(before.Conditions, trainer.TrainJobSuspended); c != nil && !c.LastTransitionTime.IsZero() {
				queued.WithLabelValues(rt).Observe(seconds(now.Sub(c.LastTransitionTime.Time)))
			}
		}
		if to == StateRunning && after.StartTime != nil {
			startup.WithLabelValues(rt).Observe(seconds(now.Sub(after.StartTime.Time)))
		}
	}
	if a := after.Restarts; a != nil {
		var b trainer.RestartsStatus
		if before.Restarts != nil {
			b = *before.Restarts
		}
		if n := a.Count - b.Count; n > 0 {
			counted := min(max(a.CountedTowardsMax-b.CountedTowardsMax, 0), n)
			reason := a.LastReason
			if reason == "" {
				reason = "Unknown"
			}
			restarts.WithLabelValues(reason, "true").Add(float64(counted))
			restarts.WithLabelValues(reason, "false").Add(float64(n - counted))
		}
	}
	if !acts.deadlineDue.IsZero() {
		deadlinesExceeded.WithLabelValues(rt).Inc()
		timerLag.WithLabelValues(TimerDeadline).Observe(seconds(now.Sub(acts.deadlineDue)))
	}
}

// observeTTLDeletion counts a TTL deletion issued at now.
func observeTTLDeletion(tj *trainer.TrainJob, acts lifecycleActions, now time.Time) {
	ttlDeletions.WithLabelValues(tj.Spec.RuntimeRef.Name).Inc()
	timerLag.WithLabelValues(TimerTTL).Observe(seconds(now.Sub(acts.ttlDue)))
}

// observeJobSetError counts a reconcile that failed to bring the JobSet in line.
func observeJobSetError(err error) {
	if err == nil {
		return
	}
	reason := errorOther
	switch {
	case errors.Is(err, errRuntimeNotFound):
		reason = errorRuntimeNotFound
	case errors.Is(err, errJobSetRejected):
		reason = errorRejected
	case errors.Is(err, errApplyRetried):
		reason = errorApply
	case errors.Is(err, errForeignSnapshot), errors.Is(err, errRender):
		reason = errorRender
	}
	jobSetErrors.WithLabelValues(reason).Inc()
}

func seconds(d time.Duration) float64 { return max(d.Seconds(), 0) }

// stateCollector reports kiln_trainjobs from the cache: a gauge that no restart, missed
// event or deleted job can put wrong, because nothing is kept between scrapes. Only the
// leader reports it (elected is closed once this replica leads; nil: always), so that a
// sum over replicas counts each job once.
type stateCollector struct {
	reader  client.Reader
	elected <-chan struct{}
}

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- trainJobsDesc }

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.elected != nil {
		select {
		case <-c.elected:
		default:
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list := &trainer.TrainJobList{}
	if err := c.reader.List(ctx, list); err != nil {
		// Before the cache synced (or without a cache at all): no figure rather than a wrong one.
		klog.FromContext(ctx).V(2).Info("Not reporting kiln_trainjobs", "err", err)
		return
	}
	counts := map[string]map[string]int{}
	for i := range list.Items {
		tj := &list.Items[i]
		if ptr.Deref(tj.Spec.ManagedBy, trainer.TrainJobControllerName) != trainer.TrainJobControllerName {
			continue
		}
		rt := tj.Spec.RuntimeRef.Name
		if counts[rt] == nil {
			counts[rt] = map[string]int{}
		}
		s := jobState(tj, &tj.Status)
		if s == "" {
			s = StateStarting
			if ptr.Deref(tj.Spec.Suspend, false) {
				s = StateSuspended
			}
		}
		counts[rt][s]++
	}
	runtimes := make([]string, 0, len(counts))
	for rt := range counts {
		runtimes = append(runtimes, rt)
	}
	sort.Strings(runtimes)
	// Every state of every runtime that has jobs, zeros included: a state that empties shows
	// 0, not a vanished series.
	for _, rt := range runtimes {
		for _, s := range allStates {
			ch <- prometheus.MustNewConstMetric(trainJobsDesc, prometheus.GaugeValue, float64(counts[rt][s]), s, rt)
		}
	}
}

// registerStateCollector (re)registers the kiln_trainjobs collector reading through r once
// elected: a
// manager set up again in the same process (tests) replaces the previous one.
func registerStateCollector(r client.Reader, elected <-chan struct{}) error {
	c := stateCollector{reader: r, elected: elected}
	if err := ctrlmetrics.Registry.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return err
		}
		ctrlmetrics.Registry.Unregister(are.ExistingCollector)
		return ctrlmetrics.Registry.Register(c)
	}
	return nil
}
