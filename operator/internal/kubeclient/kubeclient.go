// Package kubeclient builds the HTTP client the operator's controllers share to reach the
// Kubernetes API.
//
// client-go speaks HTTP/2 when the apiserver offers it, and then every request and watch
// of a process goes over one TCP connection. When a thousand deadlines fall due together,
// the 32 TrainJob workers' status writes, the stopper's JobSet deletions, the kept-logs
// controller's log streams and every watch's events share that connection, and on two
// saturated cores the writes' answers came late (docs/performance.md, "Written, begun,
// seen": every worker waiting on an answer, none on the rate limiter). Over HTTP/1.1 each
// request under way has a connection of its own: measured on the deadline scenario in six
// alternated pairs, Failed written p99 within 1 s in four runs of six against three, the
// JobSets created alongside the submission instead of seconds after it, for about 50 KiB
// per connection kept (docs/performance.md, "The operator over HTTP/1.1, measured").
//
// client-go keeps 25 idle connections per host; past that, a finished request's connection
// is closed and the next request pays a TLS handshake on both sides. The client here keeps
// as many as the operator has requests under way at its busiest.
package kubeclient

import (
	"fmt"
	"net"
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// Protocols the operator may speak to the Kubernetes API.
const (
	HTTP1 = "http/1.1"
	HTTP2 = "h2"
)

// HTTPClientFor returns the HTTP client for cfg: client-go's own (HTTP/2 when the apiserver
// offers it) for protocol HTTP2, else one that speaks HTTP/1.1 and keeps up to idle
// connections open between requests. Authentication (bearer token and its file, client
// certificate, exec plugins) and TLS are cfg's, as client-go applies them.
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
	if cfg.Transport != nil {
		// A caller's own transport decides its protocol.
		return rest.HTTPClientFor(cfg)
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		tlsConfig.NextProtos = []string{HTTP1}
	}
	proxy := http.ProxyFromEnvironment
	if cfg.Proxy != nil {
		proxy = cfg.Proxy
	}
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if cfg.Dial != nil {
		dial = cfg.Dial
	}
	// With NextProtos HTTP/1.1 only, client-go's defaults leave HTTP/2 off (and plain HTTP
	// is HTTP/1.1 anyway).
	t := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               proxy,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		DialContext:         dial,
		DisableCompression:  cfg.DisableCompression,
	})
	rt, err := rest.HTTPWrappersForConfig(cfg, t)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt, Timeout: cfg.Timeout}, nil
}
