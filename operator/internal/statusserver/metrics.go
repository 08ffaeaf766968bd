package statusserver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Aggregate figures only: no per-job labels, whatever the number of jobs.
var (
	updatesReceived = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kiln_progress_updates_received_total",
		Help: "Progress updates trainers posted to the status server and it accepted.",
	})
	updatesRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_progress_updates_refused_total",
		Help: "Progress updates the status server refused, by reason: unauthenticated (401), forbidden (403), invalid (400), too_large (413), rate_limited (429), unavailable (503: no verdict on the token in time), error (500).",
	}, []string{"reason"})
	writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kiln_progress_writes_total",
		Help: "Writes of the status server to the Kubernetes API, by kind (status: a TrainJob's trainerStatus; history: its TrainJobMetrics) and result.",
	}, []string{"kind", "result"})
	writeLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "kiln_progress_write_lag_seconds",
		Help:    "From the first progress update a status write carries to the end of that write.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60},
	})
)

func init() {
	metrics.Registry.MustRegister(updatesReceived, updatesRefused, writes, writeLag)
}

func observeWrite(kind, result string) { writes.WithLabelValues(kind, result).Inc() }

func observeLag(d time.Duration) { writeLag.Observe(d.Seconds()) }
