package trainjob

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kiln-ml/kiln/api/telemetry"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Tracing: a reconcile that acts (a state entered, an event, a JobSet written, a deadline
// or TTL carried out, an error) is a span of the TrainJob's trace, the one its submission
// started (telemetry.TraceParentAnnotation): one trace then shows submit, queueing,
// admission, the JobSet, and the end. Reconciles that change nothing make no span; since
// that is known only at the end, a reconcile notes what it did (reconcileTrace) and the
// spans are recorded afterwards with their real start and end times.

// reconcileTrace is what one reconcile did, for its span.
type reconcileTrace struct {
	start time.Time
	steps []tracedStep
}

// tracedStep is a write the reconcile made: a child span.
type tracedStep struct {
	name       string
	start, end time.Time
	err        error
}

type reconcileTraceKey struct{}

func withReconcileTrace(ctx context.Context) (context.Context, *reconcileTrace) {
	t := &reconcileTrace{start: time.Now()}
	return context.WithValue(ctx, reconcileTraceKey{}, t), t
}

// traceStep notes a write of the reconcile in ctx that began at start and ends now.
func traceStep(ctx context.Context, name string, start time.Time, err error) {
	if t, ok := ctx.Value(reconcileTraceKey{}).(*reconcileTrace); ok {
		t.steps = append(t.steps, tracedStep{name: name, start: start, end: time.Now(), err: err})
	}
}

// spanName names a reconcile's span by what it did.
func spanName(from, to string, acts lifecycleActions) string {
	switch {
	case !acts.deadlineDue.IsZero():
		return "TrainJob deadline exceeded"
	case acts.deleteTrainJob:
		return "TrainJob TTL expired"
	case from != to && to != "":
		return "TrainJob " + to
	}
	return "TrainJob reconcile"
}

// recordTrace records the reconcile's span (and its writes') when it acted.
func recordTrace(ctx context.Context, t *reconcileTrace, tj *trainer.TrainJob, from, to string, evs []event, acts lifecycleActions, err error) {
	acted := from != to || len(evs) > 0 || len(t.steps) > 0 || acts.deleteJobSet || acts.deleteTrainJob || err != nil
	if !acted {
		return
	}
	ctx = telemetry.FromAnnotations(ctx, tj.Annotations)
	ctx, span := telemetry.Tracer().Start(ctx, spanName(from, to, acts), trace.WithTimestamp(t.start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("k8s.namespace.name", tj.Namespace),
			attribute.String("kiln.trainjob.name", tj.Name),
			attribute.String("kiln.trainjob.uid", string(tj.UID)),
			attribute.String("kiln.trainjob.runtime", tj.Spec.RuntimeRef.Name),
			attribute.String("kiln.trainjob.state.from", from),
			attribute.String("kiln.trainjob.state", to),
		))
	for _, s := range t.steps {
		_, child := telemetry.Tracer().Start(ctx, s.name, trace.WithTimestamp(s.start))
		if s.err != nil {
			child.RecordError(s.err)
			child.SetStatus(codes.Error, s.err.Error())
		}
		child.End(trace.WithTimestamp(s.end))
	}
	for _, e := range evs {
		span.AddEvent(e.reason, trace.WithAttributes(attribute.String("k8s.event.type", e.kind), attribute.String("k8s.event.note", e.note)))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
