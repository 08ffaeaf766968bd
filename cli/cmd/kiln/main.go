// Command kiln submits, follows and controls training jobs through Kiln's API server.
// Installed as kubectl-kiln it is also the kubectl plugin `kubectl kiln`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kiln-ml/kiln/api/telemetry"
	"github.com/kiln-ml/kiln/api/version"
	"github.com/kiln-ml/kiln/cli/internal/cmd/root"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

func main() {
	io := iostreams.System()
	f := factory.New(io)
	cmd := root.NewCmdRoot(f, filepath.Base(os.Args[0]))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := traced(ctx, func(ctx context.Context) (string, error) {
		c, err := cmd.ExecuteContextC(ctx)
		if c == nil {
			return "", err
		}
		return c.CommandPath(), err
	})
	stop()
	if err != nil {
		var ee *factory.ExitErr
		if !asSilent(err, &ee) {
			server := f.Server
			if kc, cerr := f.ResolveContext(); cerr == nil {
				server = kc.Server
			}
			fmt.Fprintln(io.ErrOut, "kiln: "+factory.Message(err, server))
		}
	}
	os.Exit(factory.ExitCode(err))
}

// asSilent reports whether err is an exit whose message was already shown.
func asSilent(err error, ee **factory.ExitErr) bool {
	ok := errors.As(err, ee)
	return ok && (*ee).Err == nil
}

// traced runs the command as the root span of its trace, exported over OTLP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set: the API server's spans, and the operator's for a job
// it submits, join that trace. A TRACEPARENT variable (a W3C traceparent, as OpenTelemetry's
// environment carriers) makes the command part of its caller's trace, e.g. a pipeline's.
func traced(ctx context.Context, run func(context.Context) (string, error)) error {
	shutdown, err := telemetry.Setup(ctx, "kiln-cli", version.Version, telemetry.Options{})
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(flush)
	}()
	if tp := os.Getenv("TRACEPARENT"); tp != "" {
		ctx = telemetry.FromAnnotations(ctx, map[string]string{telemetry.TraceParentAnnotation: tp, telemetry.TraceStateAnnotation: os.Getenv("TRACESTATE")})
	}
	ctx, span := telemetry.Tracer().Start(ctx, "kiln", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	name, err := run(ctx)
	if name != "" {
		span.SetName(name)
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}
