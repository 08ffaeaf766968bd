// Package server assembles Kiln's API server: the Connect services behind authentication,
// telemetry, logging and limits, health and reflection, served over h2c and TLS.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"connectrpc.com/otelconnect"

	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	"github.com/kiln-ml/kiln/apiserver/internal/auth"
	"github.com/kiln-ml/kiln/apiserver/internal/console"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/service"
)

// Options shape the server.
type Options struct {
	// UnaryTimeout bounds every unary call (0: none).
	UnaryTimeout time.Duration
	// MaxRequestBytes bounds every request message.
	MaxRequestBytes int
	// ExtraKeys are the user extras passed on to Kubernetes (see auth.Interceptor).
	ExtraKeys []string
	Log       *slog.Logger
}

// Server is the API server's HTTP handler, and what it needs to stop cleanly.
type Server struct {
	Handler http.Handler
	ready   atomic.Bool
	stop    chan struct{}
}

// New assembles the services and their middleware.
func New(k *kube.Clients, authn auth.Authenticator, o Options) (*Server, error) {
	// A call continues its caller's trace (the CLI's, an SDK user's), so that one trace runs
	// from a submission to the job's completion; by default otelconnect would start a new
	// trace with only a link to the caller's.
	otel, err := otelconnect.NewInterceptor(otelconnect.WithTrustRemote())
	if err != nil {
		return nil, fmt.Errorf("creating OpenTelemetry interceptor: %w", err)
	}
	authInt := &auth.Interceptor{Authenticator: authn, ExtraKeys: o.ExtraKeys}
	m := newMetrics()
	opts := []connect.HandlerOption{
		// Outermost first: telemetry sees every call, logging and metrics every outcome,
		// then the caller is authenticated, then unary calls get their deadline.
		connect.WithInterceptors(otel, logInterceptor{log: o.Log, metrics: m}, authInt, timeoutInterceptor{timeout: o.UnaryTimeout}),
		connect.WithReadMaxBytes(o.MaxRequestBytes),
		// JSON requests are read strictly: an unknown field or enum value is refused, named.
		connect.WithCodec(jsonCodecs[0]), connect.WithCodec(jsonCodecs[1]),
		connect.WithCompressMinBytes(1024),
	}
	s := &Server{stop: make(chan struct{})}
	jobs := service.NewTrainJobs(k, s.stop)
	mux := http.NewServeMux()
	// Each call's caller is authenticated before its body is read (auth.BeforeBody).
	handle := func(path string, h http.Handler) { mux.Handle(path, authInt.BeforeBody(h)) }
	handle(kilnv1connect.NewTrainJobServiceHandler(jobs, opts...))
	handle(kilnv1connect.NewRuntimeServiceHandler(service.NewRuntimes(k), opts...))
	handle(kilnv1connect.NewQueueServiceHandler(service.NewQueues(k, jobs), opts...))
	handle(kilnv1connect.NewServerServiceHandler(service.NewServerInfo(k), opts...))
	handle(kilnv1connect.NewCronTrainJobServiceHandler(service.NewCronTrainJobs(k, jobs), opts...))

	names := []string{
		kilnv1connect.TrainJobServiceName, kilnv1connect.RuntimeServiceName,
		kilnv1connect.QueueServiceName, kilnv1connect.ServerServiceName, kilnv1connect.CronTrainJobServiceName,
	}
	// Health and reflection need no token: load balancers and grpcurl call them.
	mux.Handle(grpchealth.NewHandler(healthChecker{s: s, services: names}))
	reflector := grpcreflect.NewStaticReflector(names...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle("GET "+MetricsPath, m.handler(authInt, k.Authorizer))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "not ready: caches syncing or shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	// The web console: its page and assets at every other path. Serving them needs no token;
	// every call the page makes carries the user's.
	mux.Handle("/", console.Handler())
	s.Handler = mux
	return s, nil
}

// SetReady says whether the server should get traffic.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

type healthChecker struct {
	s        *Server
	services []string
}

func (h healthChecker) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	known := req.Service == ""
	for _, n := range h.services {
		known = known || n == req.Service
	}
	if !known {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	if !h.s.ready.Load() {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// Listener is an address to serve on, in the clear (h2c) or over TLS.
type Listener struct {
	Addr string
	// Listener, when set, is used instead of listening on Addr.
	Listener net.Listener
	// TLS, when set, serves HTTPS (HTTP/2 and HTTP/1.1); otherwise HTTP/1.1 and h2c.
	TLS *tls.Config
}

// Serve serves until ctx ends, then shuts down gracefully: it stops being ready, ends the
// streams (watches and logs resume elsewhere), and gives unary calls up to grace to finish.
func (s *Server) Serve(ctx context.Context, log *slog.Logger, grace time.Duration, listeners ...Listener) error {
	var servers []*http.Server
	errc := make(chan error, len(listeners))
	for _, l := range listeners {
		ln := l.Listener
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", l.Addr); err != nil {
				return fmt.Errorf("listening on %s: %w", l.Addr, err)
			}
		}
		srv := &http.Server{
			Handler:           s.Handler,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       5 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			Protocols:         new(http.Protocols),
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		srv.Protocols.SetHTTP1(true)
		if l.TLS != nil {
			srv.Protocols.SetHTTP2(true)
			srv.TLSConfig = l.TLS
			ln = tls.NewListener(ln, l.TLS)
		} else {
			srv.Protocols.SetUnencryptedHTTP2(true)
		}
		servers = append(servers, srv)
		log.Info("Serving", "address", ln.Addr().String(), "tls", l.TLS != nil)
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serving %s: %w", l.Addr, err)
			}
		}()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	log.Info("Shutting down", "grace", grace)
	s.SetReady(false)
	close(s.stop)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil {
			serveErr = errors.Join(serveErr, fmt.Errorf("shutting down: %w", err))
			_ = srv.Close()
		}
	}
	return serveErr
}
