package kubeclient

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// apiserver is a TLS server that offers HTTP/2, as kube-apiserver does, and counts the
// connections it accepted.
func apiserver(t *testing.T, handler http.HandlerFunc) (*rest.Config, *atomic.Int32) {
	t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	srv.EnableHTTP2 = true
	var conns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &rest.Config{Host: srv.URL, BearerToken: "secret-token", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, &conns
}

// get makes n requests at once and returns the protocols they were served over.
func get(t *testing.T, c *http.Client, url string, n int) []string {
	t.Helper()
	protos := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d", resp.StatusCode)
			}
			protos[i] = resp.Proto
		})
	}
	wg.Wait()
	return protos
}

func TestHTTP1KeepsAConnectionPerRequestUnderWayAndAuthenticates(t *testing.T) {
	arrived, release := make(chan struct{}, 80), make(chan struct{})
	cfg, conns := apiserver(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret-token" {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		arrived <- struct{}{}
		<-release
	})
	c, err := HTTPClientFor(cfg, HTTP1, 40)
	if err != nil {
		t.Fatal(err)
	}
	// 40 requests at once, held until all have arrived: each has a connection of its own
	// (over HTTP/2 they would share one).
	done := make(chan []string)
	go func() { done <- get(t, c, cfg.Host, 40) }()
	for range 40 {
		select {
		case p := <-done:
			t.Fatalf("requests ended before all 40 were under way: %v", p)
		case <-arrived:
		}
	}
	close(release)
	for _, p := range <-done {
		if p != "HTTP/1.1" {
			t.Fatalf("served over %s, want HTTP/1.1", p)
		}
	}
	if got := conns.Load(); got != 40 {
		t.Fatalf("%d connections for 40 requests at once, want 40", got)
	}
	// Another 40: all on the connections kept idle, none handshakes again (client-go's
	// own transport keeps 25 and would open 15 more).
	get(t, c, cfg.Host, 40)
	if got := conns.Load(); got != 40 {
		t.Fatalf("%d connections after a second round of 40, want the 40 kept idle", got)
	}
}

func TestHTTP2IsClientGosOwn(t *testing.T) {
	cfg, conns := apiserver(t, func(http.ResponseWriter, *http.Request) {})
	c, err := HTTPClientFor(cfg, HTTP2, 1)
	if err != nil {
		t.Fatal(err)
	}
	// One request first: concurrent first requests may each dial before the connection is up.
	get(t, c, cfg.Host, 1)
	for _, p := range get(t, c, cfg.Host, 10) {
		if p != "HTTP/2.0" {
			t.Fatalf("served over %s, want HTTP/2.0", p)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Fatalf("%d connections, want every request over one", got)
	}
}

func TestBadSettingsNameTheFlag(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	for _, tc := range []struct {
		protocol string
		idle     int
		want     string
	}{
		{"http2", 10, "--kube-api-protocol=\"http2\": use http/1.1 or h2"},
		{HTTP1, 0, "--kube-api-idle-connections=0: give at least 1"},
	} {
		_, err := HTTPClientFor(cfg, tc.protocol, tc.idle)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("HTTPClientFor(%q, %d) = %v, want an error containing %q", tc.protocol, tc.idle, err, tc.want)
		}
	}
}
