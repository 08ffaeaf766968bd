package webhook

import (
	"crypto/tls"
	"errors"
	"net/http"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// DrainingServer is a webhook server that can be told to drain before it stops. The
// kube-apiserver keeps its connections to a webhook alive and sends request after request
// down them; when a replica's server shuts down, it closes the idle ones, and a request
// the apiserver writes into one at that moment fails the admission ("write: broken pipe":
// the apiserver retries no webhook call). While draining, every answer carries
// "Connection: close", so the apiserver drops each connection once its answer is read and
// opens the next one through the Service, to a replica that is not leaving, and the readiness
// check fails. When the server finally stops, nothing of the apiserver's is left on it.
type DrainingServer struct {
	webhook.Server
	draining atomic.Bool
}

// NewDrainingServer wraps srv.
func NewDrainingServer(srv webhook.Server) *DrainingServer {
	return &DrainingServer{Server: srv}
}

// NewServer is the operator's webhook server on host:port, serving the certificate in
// certDir over HTTP/1.1 only.
func NewServer(host string, port int, certDir string) *DrainingServer {
	return NewDrainingServer(webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir, TLSOpts: []func(*tls.Config){HTTP1Only}}))
}

// HTTP1Only has a TLS server offer HTTP/1.1 alone. controller-runtime's servers offer
// HTTP/2 first, and the kube-apiserver then sends every webhook call down one HTTP/2
// connection; over HTTP/1.1 it keeps a pool of connections and sends calls in parallel
// (docs/performance.md, "Webhooks").
func HTTP1Only(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// Register serves hook at path, closing the connection after each answer once draining.
func (s *DrainingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
}

// Drain starts draining; it cannot be undone.
func (s *DrainingServer) Drain() { s.draining.Store(true) }

// ReadyChecker fails once draining, and otherwise reports whether the server serves.
func (s *DrainingServer) ReadyChecker(req *http.Request) error {
	if s.draining.Load() {
		return errors.New("draining before shutdown")
	}
	return s.StartedChecker()(req)
}
