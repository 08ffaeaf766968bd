// Package telemetry sets up OpenTelemetry for Kiln's programs (the operator, the API server,
// the CLI): OTLP/HTTP export when an OTLP endpoint is configured with the standard OTEL_*
// variables, nothing otherwise, and the W3C propagators either way. It also carries a trace
// context on a Kubernetes object, so that a TrainJob's trace runs from its submission to
// its completion across the programs that handle it.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Enabled reports whether an OTLP endpoint is configured, and OTEL_SDK_DISABLED is not true.
func Enabled() bool {
	if os.Getenv("OTEL_SDK_DISABLED") == "true" {
		return false
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// Options choose what a program exports.
type Options struct {
	// Metrics also exports OpenTelemetry metrics over OTLP (the API server's RPC metrics);
	// the operator's metrics are Prometheus'.
	Metrics bool
}

// Setup installs the W3C propagators and, when Enabled, global tracer (and meter) providers
// exporting over OTLP/HTTP, configured by the OTEL_* variables (endpoint, headers, sampler,
// batch delays). The returned function flushes and stops them.
func Setup(ctx context.Context, service, version string, o Options) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(service), semconv.ServiceVersion(version)))
	if err != nil {
		return nil, fmt.Errorf("describing the OpenTelemetry resource: %w", err)
	}
	otel.SetErrorHandler(&quietErrors{every: time.Minute})
	traces, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP trace exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(traces), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	shutdown := []func(context.Context) error{tp.Shutdown}
	if o.Metrics {
		metrics, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("creating the OTLP metric exporter: %w", err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)), sdkmetric.WithResource(res))
		otel.SetMeterProvider(mp)
		shutdown = append(shutdown, mp.Shutdown)
	}
	return func(ctx context.Context) error {
		var errs []error
		for _, s := range shutdown {
			errs = append(errs, s(ctx))
		}
		return errors.Join(errs...)
	}, nil
}

// quietErrors logs OpenTelemetry's errors (an unreachable collector fails every export) at
// most once per period, with how many it left out.
type quietErrors struct {
	every   time.Duration
	mu      sync.Mutex
	last    time.Time
	dropped int
}

func (q *quietErrors) Handle(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if time.Since(q.last) < q.every {
		q.dropped++
		return
	}
	if q.dropped > 0 {
		log.Printf("OpenTelemetry: %v (and %d more errors in the last %s)", err, q.dropped, time.Since(q.last).Round(time.Second))
	} else {
		log.Printf("OpenTelemetry: %v", err)
	}
	q.last, q.dropped = time.Now(), 0
}
