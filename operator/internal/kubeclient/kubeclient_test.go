package kubeclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
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

// clientCert writes a new self-signed client certificate with this serial number and its
// key over the files at certFile and keyFile.
func clientCert(t *testing.T, certFile, keyFile string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "kiln-operator"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// A later modification time than the files had: client-go reloads files whose time changed.
	at := time.Now().Add(time.Duration(serial) * time.Second)
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// A client certificate renewed on disk (as a kubeconfig's client-certificate file is) is
// used from then on, also by the connections kept idle: client-go's rotation closes them.
func TestHTTP1ClientCertificateRotates(t *testing.T) {
	transport.CertCallbackRefreshDuration = 50 * time.Millisecond
	t.Cleanup(func() { transport.CertCallbackRefreshDuration = 5 * time.Minute })
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.TLS.PeerCertificates[0].SerialNumber.String()))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	clientCert(t, certFile, keyFile, 1)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertFile: certFile, KeyFile: keyFile}}
	c, err := HTTPClientFor(cfg, HTTP1, 8)
	if err != nil {
		t.Fatal(err)
	}
	serialOf := func() string {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := serialOf(); got != "1" {
		t.Fatalf("served with certificate %s, want 1", got)
	}
	clientCert(t, certFile, keyFile, 2)
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return serialOf() == "2", nil
	}); err != nil {
		t.Fatal("the renewed client certificate was not used within 10 s: the kept connection still presents the old one")
	}
}
