package statusserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Limits of a request.
const (
	// maxBodySize is upstream's: 64 KiB holds 256 metrics of 64-character names and values.
	maxBodySize = 1 << 16
	// A job may post this many updates per second, in bursts of perJobBurst: every rank of
	// a large job posting every step is refused (429), not written.
	perJobRate  = 5
	perJobBurst = 20
	// defaultAnswerWithin bounds what a request waits for (its token's review): past it, the
	// trainer is told to come back (503 with Retry-After), see Options.AnswerWithin.
	defaultAnswerWithin = 8 * time.Second
	// answerMargin is the connection's write deadline past AnswerWithin, for the answer itself.
	answerMargin = 2 * time.Second
)

// Options configure the status server.
type Options struct {
	// BindAddress is where it listens, e.g. ":10443".
	BindAddress string
	// CertDir holds tls.crt and tls.key (the webhook server's), reloaded when they change.
	CertDir string
	Writer  WriterOptions
	// AnswerWithin bounds the wait of a request for its token's review (8 s when 0). A
	// thousand trainers starting together queue for the server's API budget; those it
	// cannot review in time are answered 503 with Retry-After, always before the
	// connection's write deadline (AnswerWithin + 2 s): a write past that deadline breaks
	// the TLS stream, and the trainer saw "tls: bad record MAC" instead of an answer.
	AnswerWithin time.Duration
	// Clock is the real clock unless a test sets one.
	Clock clock.WithTicker
}

// Server is the status server, a manager.Runnable run by every replica (a trainer may
// reach any of them through the Service).
type Server struct {
	opts   Options
	auth   *Authenticator
	writer *writer

	mu       sync.Mutex
	limiters map[types.NamespacedName]*limiter
	// ready is closed once the server listens.
	ready chan struct{}
	addr  net.Addr
}

type limiter struct {
	*rate.Limiter
	last time.Time
}

var (
	_ manager.Runnable               = &Server{}
	_ manager.LeaderElectionRunnable = &Server{}
)

// New returns a status server that reads and writes through c, a client of its own whose
// rate limit bounds all its requests.
func New(c client.Client, opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.AnswerWithin <= 0 {
		opts.AnswerWithin = defaultAnswerWithin
	}
	return &Server{
		opts:     opts,
		auth:     NewAuthenticator(c, opts.Clock),
		writer:   newWriter(c, opts.Clock, opts.Writer),
		limiters: map[types.NamespacedName]*limiter{},
		ready:    make(chan struct{}),
	}
}

// NeedLeaderElection is false: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Addr is the address the server listens on, once it does.
func (s *Server) Addr() net.Addr {
	<-s.ready
	return s.addr
}

// ReadyChecker is a readiness check: it fails until the server listens, so that a replica
// is ready for trainers' reports only once it can answer them.
func (s *Server) ReadyChecker(*http.Request) error {
	select {
	case <-s.ready:
		return nil
	default:
		return errors.New("the status server is not listening yet")
	}
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+trainer.StatusPath("{namespace}", "{name}"), s.update)
	mux.HandleFunc(trainer.StatusPath("{namespace}", "{name}"), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		answer(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, r.Method+" is not supported: POST an UpdateTrainJobStatusRequest")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no such endpoint %s: POST to %s", r.URL.Path, trainer.StatusPath("<namespace>", "<name>")))
	})
	return recovering(mux)
}

// Start serves until ctx ends, then writes what it still holds.
func (s *Server) Start(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("status-server")
	ctx = klog.NewContext(ctx, log)
	watcher, err := certwatcher.New(s.opts.CertDir+"/tls.crt", s.opts.CertDir+"/tls.key")
	if err != nil {
		return fmt.Errorf("status server certificate: %w", err)
	}
	go func() {
		if err := watcher.Start(ctx); err != nil {
			log.Error(err, "Watching the status server's certificate")
		}
	}()
	l, err := net.Listen("tcp", s.opts.BindAddress)
	if err != nil {
		return fmt.Errorf("status server: %w", err)
	}
	s.addr = l.Addr()
	close(s.ready)
	srv := &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.opts.AnswerWithin + answerMargin,
		WriteTimeout:      s.opts.AnswerWithin + answerMargin,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	writerDone := make(chan struct{})
	go func() {
		s.writer.run(ctx)
		close(writerDone)
	}()
	go s.sweepLimiters(ctx)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("Serving trainer status updates", "address", s.addr.String())
	err = srv.ServeTLS(l, "", "")
	<-writerDone
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// update handles POST <StatusPath>.
func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	job := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.AnswerWithin)
	defer cancel()
	if err := s.auth.Authorize(ctx, r.Header.Get("Authorization"), job); err != nil {
		switch err.code {
		case http.StatusUnauthorized:
			updatesRefused.WithLabelValues("unauthenticated").Inc()
			answer(w, err.code, metav1.StatusReasonUnauthorized, err.reason)
		case http.StatusForbidden:
			updatesRefused.WithLabelValues("forbidden").Inc()
			answer(w, err.code, metav1.StatusReasonForbidden, err.reason)
		default:
			// No verdict: the Kubernetes API did not answer in time or at all. Not the
			// trainer's fault: it retries later, spread so that a crowd does not come back
			// together.
			klog.FromContext(r.Context()).V(2).Info("No verdict on a trainer's token", "trainJob", job, "err", err.reason)
			updatesRefused.WithLabelValues("unavailable").Inc()
			w.Header().Set("Retry-After", strconv.Itoa(2+rand.IntN(9)))
			answer(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, err.reason)
		}
		return
	}
	if ok, retry := s.allow(job); !ok {
		updatesRefused.WithLabelValues("rate_limited").Inc()
		w.Header().Set("Retry-After", strconv.Itoa(int(max(1, retry.Round(time.Second).Seconds()))))
		answer(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("TrainJob %s posts more than %d updates a second: post from one rank only, and at most every few seconds", job, perJobRate))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodySize))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			updatesRefused.WithLabelValues("too_large").Inc()
			answer(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
				fmt.Sprintf("the body is larger than %d bytes: send fewer or shorter metrics (at most %d, names and values of at most %d characters)", maxBodySize, trainer.MaxTrainerMetrics, trainer.MaxMetricFieldLength))
			return
		}
		answer(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "reading the body: "+err.Error())
		return
	}
	req, unknown, err := decode(body)
	if err != nil {
		updatesRefused.WithLabelValues("invalid").Inc()
		answer(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	if req.TrainerStatus != nil {
		if errs := validate(req.TrainerStatus); len(errs) > 0 {
			updatesRefused.WithLabelValues("invalid").Inc()
			answer(w, http.StatusBadRequest, metav1.StatusReasonInvalid, "TrainJob "+job.String()+" status update is invalid, nothing was written: "+errs.ToAggregate().Error())
			return
		}
		now := s.opts.Clock.Now()
		ts := req.TrainerStatus.DeepCopy()
		// The trainer's clock says when it observed this; a missing or future time is now.
		if ts.LastUpdatedTime.IsZero() || ts.LastUpdatedTime.After(now) {
			ts.LastUpdatedTime = metav1.NewTime(now)
		}
		ts.LastUpdatedTime = metav1.NewTime(ts.LastUpdatedTime.Truncate(time.Second))
		s.writer.add(job, ts)
		req.TrainerStatus = ts
		updatesReceived.Inc()
	}
	for _, f := range unknown {
		w.Header().Add("Warning", fmt.Sprintf(`299 - "unknown field %s ignored"`, strings.ReplaceAll(f, `"`, "'")))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(req)
}

// allow takes one request from job's rate.
func (s *Server) allow(job types.NamespacedName) (bool, time.Duration) {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limiters[job]
	if l == nil {
		l = &limiter{Limiter: rate.NewLimiter(perJobRate, perJobBurst)}
		s.limiters[job] = l
	}
	l.last = now
	r := l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (s *Server) sweepLimiters(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Clock.After(time.Minute):
		}
		cutoff := s.opts.Clock.Now().Add(-time.Minute)
		s.mu.Lock()
		for k, l := range s.limiters {
			if l.last.Before(cutoff) {
				delete(s.limiters, k)
			}
		}
		s.mu.Unlock()
	}
}

// answer writes a Kubernetes Status, as upstream's server does.
func answer(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: message, Reason: reason, Code: int32(code),
	})
}

func recovering(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				klog.FromContext(r.Context()).Error(fmt.Errorf("%v", v), "Panic serving a status update", "path", r.URL.Path)
				updatesRefused.WithLabelValues("error").Inc()
				answer(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}
