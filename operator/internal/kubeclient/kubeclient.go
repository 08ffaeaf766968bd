// Package kubeclient builds the HTTP client the operator's controllers share to reach the
// Kubernetes API.
//
// Over HTTP/2 every request and watch of the process shares one connection, and when many
// deadlines fall due together the status writes' answers come late; over HTTP/1.1 each
// request under way has a connection of its own (docs/performance.md, "The operator over
// HTTP/1.1, measured").
//
// client-go keeps 25 idle connections per host; past that, a finished request's connection
// is closed and the next request pays a TLS handshake on both sides. The client here keeps
// as many as the operator has requests under way at its busiest. Everything else (TLS,
// client-certificate and CA rotation, proxies, authentication) is client-go's own transport.
package kubeclient

import (
	"fmt"
	"net/http"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// Protocols the operator may speak to the Kubernetes API.
const (
	HTTP1 = "http/1.1"
	HTTP2 = "h2"
)

// HTTPClientFor returns the HTTP client for cfg: client-go's own (HTTP/2 when the apiserver
// offers it) for protocol HTTP2, else client-go's own told to offer HTTP/1.1 only, keeping
// up to idle connections open between requests.
func HTTPClientFor(cfg *rest.Config, protocol string, idle int) (*http.Client, error) {
	switch protocol {
	case HTTP2:
		return rest.HTTPClientFor(cfg)
	case HTTP1:
	default:
		return nil, fmt.Errorf("--kube-api-protocol=%q: use %s or %s", protocol, HTTP1, HTTP2)
	}
	if idle < 1 {
		return nil, fmt.Errorf("--kube-api-idle-connections=%d: give at least 1 (the requests the operator has under way at its busiest: TrainJob workers, stopper, kept logs)", idle)
	}
	cfg = rest.CopyConfig(cfg)
	// With HTTP/1.1 alone in the TLS handshake's protocols, client-go leaves HTTP/2 off.
	cfg.NextProtos = []string{HTTP1}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		keepIdle(rt, idle)
		return rt
	})
	return rest.HTTPClientFor(cfg)
}

// keepIdle raises the idle connections kept by the http.Transport under client-go's
// wrappers (its transport cache's, its CA rotation's). That transport is client-go's for
// this configuration alone: the HTTP/1.1-only protocols are part of its cache key.
func keepIdle(rt http.RoundTripper, idle int) {
	for rt != nil {
		switch t := rt.(type) {
		case *http.Transport:
			if t != http.DefaultTransport {
				t.MaxIdleConns, t.MaxIdleConnsPerHost = max(t.MaxIdleConns, idle), max(t.MaxIdleConnsPerHost, idle)
			}
			return
		case utilnet.RoundTripperWrapper:
			rt = t.WrappedRoundTripper()
		default:
			return
		}
	}
}
