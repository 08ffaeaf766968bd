package server

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	"github.com/kiln-ml/kiln/apiserver/internal/auth"
)

// timeoutInterceptor bounds unary calls; streams (watches, logs) may last as long as their
// caller wants.
type timeoutInterceptor struct {
	timeout time.Duration
}

func (t timeoutInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if t.timeout <= 0 || req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, cancel := context.WithTimeout(ctx, t.timeout)
		defer cancel()
		return next(ctx, req)
	}
}

func (t timeoutInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (t timeoutInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// logInterceptor logs every call once it ended: who, what, how it ended, how long.
type logInterceptor struct {
	log     *slog.Logger
	metrics *metrics
}

// outcome is err as the call ended for its caller: a call the client ended itself (it
// cancelled, or closed a watch's stream: the normal end of a watch) is canceled, not an
// error of the server, whatever the handler returned on the way out.
func outcome(ctx context.Context, err error) error {
	if err != nil && errors.Is(ctx.Err(), context.Canceled) && connect.CodeOf(err) != connect.CodeCanceled {
		return connect.NewError(connect.CodeCanceled, err)
	}
	return err
}

func (l logInterceptor) record(ctx context.Context, caller *auth.Recorder, procedure, protocol string, stream bool, start time.Time, err error) {
	err = outcome(ctx, err)
	if l.metrics != nil {
		l.metrics.observe(procedure, stream, start, err)
	}
	code := "ok"
	level := slog.LevelInfo
	if err != nil {
		code = connect.CodeOf(err).String()
		if c := connect.CodeOf(err); c == connect.CodeInternal || c == connect.CodeUnknown || c == connect.CodeUnavailable {
			level = slog.LevelWarn
		}
	}
	user := ""
	if caller.ID != nil {
		user = caller.ID.User
	}
	attrs := []slog.Attr{
		slog.String("procedure", procedure), slog.String("protocol", protocol), slog.String("user", user),
		slog.String("code", code), slog.Duration("duration", time.Since(start)),
	}
	var ce *connect.Error
	if err != nil && errors.As(err, &ce) {
		attrs = append(attrs, slog.String("error", ce.Message()))
	}
	l.log.LogAttrs(ctx, level, "RPC finished", attrs...)
}

func (l logInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		start, caller := time.Now(), &auth.Recorder{}
		res, err := next(auth.WithRecorder(ctx, caller), req)
		l.record(ctx, caller, req.Spec().Procedure, req.Peer().Protocol, false, start, err)
		return res, err
	}
}

func (l logInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l logInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start, caller := time.Now(), &auth.Recorder{}
		err := next(auth.WithRecorder(ctx, caller), conn)
		l.record(ctx, caller, conn.Spec().Procedure, conn.Peer().Protocol, true, start, err)
		return err
	}
}
