package crontrainjob

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The CronTrainJob controller's metrics, served with the operator's others
// (docs/observability.md lists them all).

// Outcomes of kiln_crontrainjob_runs_total.
const (
	RunCreated      = "created"
	RunSkipped      = "skipped"
	RunReplaced     = "replaced"
	RunCreateFailed = "create_failed"
)

var (
	cronRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_crontrainjob_runs_total",
		Help: "Scheduled runs of CronTrainJobs, by outcome: created, skipped (concurrencyPolicy Forbid), replaced (an active run deleted by Replace), create_failed.",
	}, []string{"outcome"})

	cronMissed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kiln_crontrainjob_missed_schedules_total",
		Help: "Scheduled times of CronTrainJobs that passed without a run (only the latest of several missed times runs).",
	})

	cronLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kiln_crontrainjob_schedule_lag_seconds",
		Help:    "From a CronTrainJob's scheduled time to its run's creation.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(Metrics()...)
}

// Metrics are every metric the CronTrainJob controller serves.
func Metrics() []prometheus.Collector {
	return []prometheus.Collector{cronRuns, cronMissed, cronLag}
}

func seconds(d time.Duration) float64 { return max(d.Seconds(), 0) }
