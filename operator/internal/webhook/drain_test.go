package webhook

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// muxServer is a webhook.Server whose handlers a plain net/http test server serves.
type muxServer struct {
	webhook.Server
	mux     *http.ServeMux
	started bool
}

func (s *muxServer) Register(path string, hook http.Handler) { s.mux.Handle(path, hook) }
func (s *muxServer) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started {
			return io.ErrUnexpectedEOF
		}
		return nil
	}
}

func TestDrainingServerClosesEachConnectionAfterItsAnswer(t *testing.T) {
	inner := &muxServer{mux: http.NewServeMux(), started: true}
	srv := NewDrainingServer(inner)
	srv.Register(MutatePath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"response":{"allowed":true}}`))
	}))
	ts := httptest.NewServer(inner.mux)
	defer ts.Close()
	client := ts.Client()

	// post sends an admission-like POST and reports whether it reused a kept-alive connection
	// and whether the server asked to close it.
	post := func() (reused, closed bool) {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
			http.MethodPost, ts.URL+MutatePath, strings.NewReader(`{"request":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return reused, resp.Close
	}

	if err := srv.ReadyChecker(nil); err != nil {
		t.Fatalf("ready before draining: %v", err)
	}
	if _, closed := post(); closed {
		t.Fatal("the first answer closed its connection before draining")
	}
	if reused, closed := post(); !reused || closed {
		t.Fatalf("before draining the connection is kept alive: reused=%v closed=%v", reused, closed)
	}

	srv.Drain()
	if err := srv.ReadyChecker(nil); err == nil {
		t.Fatal("ready while draining")
	}
	// The kept-alive connection answers once more, asking to be closed; every later request
	// comes on a new connection (through the Service, to another replica), closed in turn.
	if reused, closed := post(); !reused || !closed {
		t.Fatalf("draining: reused=%v closed=%v, want the kept-alive connection closed after its answer", reused, closed)
	}
	for range 3 {
		if reused, closed := post(); reused || !closed {
			t.Fatalf("draining: reused=%v closed=%v, want a new connection, closed after its answer", reused, closed)
		}
	}
}

func TestDrainingServerIsNotReadyUntilStarted(t *testing.T) {
	srv := NewDrainingServer(&muxServer{mux: http.NewServeMux()})
	if err := srv.ReadyChecker(nil); err == nil {
		t.Fatal("ready before the server started")
	}
}
