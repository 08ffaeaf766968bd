package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The trace context of an object's submission, as the W3C traceparent and tracestate
// headers, in the object's annotations: the API server writes it on the TrainJobs it
// creates, anyone else may (kubectl, a pipeline), and the operator's spans for the object
// continue that trace. Kubernetes' KEP-5915 proposes the same for every object; until it
// settles on a key, Kiln's is its own.
const (
	TraceParentAnnotation = "kiln.dev/traceparent"
	TraceStateAnnotation  = "kiln.dev/tracestate"
)

// Annotate sets the trace context of ctx (when it has one) on annotations, creating the map
// if needed, and returns it.
func Annotate(ctx context.Context, annotations map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return annotations
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if carrier["traceparent"] == "" {
		return annotations
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[TraceParentAnnotation] = carrier["traceparent"]
	if ts := carrier["tracestate"]; ts != "" {
		annotations[TraceStateAnnotation] = ts
	}
	return annotations
}

// FromAnnotations returns ctx with the remote trace context an object's annotations carry,
// ctx unchanged when they carry none (or one that does not parse).
func FromAnnotations(ctx context.Context, annotations map[string]string) context.Context {
	tp := annotations[TraceParentAnnotation]
	if tp == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": annotations[TraceStateAnnotation]})
}

// Tracer is the tracer Kiln's programs create their spans with.
func Tracer() trace.Tracer { return otel.Tracer("github.com/kiln-ml/kiln") }
