package server

import (
	"errors"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kiln-ml/kiln/api/buildinfo"
	"github.com/kiln-ml/kiln/apiserver/internal/auth"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
)

// MetricsPath is where the server serves its Prometheus metrics, to callers Kubernetes
// authorizes for `get` on that non-resource URL (as the operator's and kube-apiserver's).
const MetricsPath = "/metrics"

// metrics are the server's Prometheus metrics: every call by procedure and code, unary
// calls' durations, and the Go runtime's and process' own. Labels are bounded: a procedure
// exists (unknown ones are answered before any interceptor) and codes are Connect's.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kiln_apiserver_requests_total",
			Help: "Finished calls, by procedure (/kiln.v1.TrainJobService/CreateTrainJob) and Connect code (ok, invalid_argument, permission_denied, ...).",
		}, []string{"procedure", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kiln_apiserver_request_duration_seconds",
			Help:    "How long unary calls took, by procedure (streams, which last as long as their caller follows, are not measured).",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"procedure"}),
	}
	m.registry.MustRegister(m.requests, m.duration, buildinfo.Collector("apiserver"),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observe counts a finished call.
func (m *metrics) observe(procedure string, stream bool, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	m.requests.WithLabelValues(procedure, code).Inc()
	if !stream {
		m.duration.WithLabelValues(procedure).Observe(time.Since(start).Seconds())
	}
}

// handler serves the metrics to a caller whose bearer token Kubernetes accepts and whom it
// allows `get` on MetricsPath: 401 without a valid token, 403 without the permission.
func (m *metrics) handler(authn *auth.Interceptor, authz *kube.Authorizer) http.Handler {
	serve := promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, err := authn.Authenticate(r.Context(), r.Header)
		if err != nil {
			status := http.StatusUnauthorized
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, errorMessage(err), status)
			return
		}
		attrs := kube.Attributes{Verb: "get", Path: MetricsPath}
		allowed, reason, err := authz.Allowed(ctx, attrs)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !allowed {
			msg := auth.FromContext(ctx).User + " may not " + attrs.String() + ": bind a ClusterRole that allows it (the chart's kiln-metrics-reader)"
			if reason != "" {
				msg += " (" + reason + ")"
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		serve.ServeHTTP(w, r.WithContext(ctx))
	})
}

func errorMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}
