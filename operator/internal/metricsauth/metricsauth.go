// Package metricsauth guards the operator's /metrics as controller-runtime does (a
// TokenReview, then a SubjectAccessReview for get on the URL), and makes its refusal say
// what to do: a 403 names the ClusterRole to bind, as the API server's does.
package metricsauth

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ReaderRole is the chart's ClusterRole that allows a scrape.
const ReaderRole = "kiln-metrics-reader"

// Filter is controller-runtime's authentication and authorization filter, its 403 answer
// completed with the fix.
func Filter(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	inner, err := filters.WithAuthenticationAndAuthorization(config, httpClient)
	if err != nil {
		return nil, err
	}
	return func(log logr.Logger, handler http.Handler) (http.Handler, error) {
		h, err := inner(log, handler)
		if err != nil {
			return nil, err
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(&hinting{ResponseWriter: w, path: r.URL.Path}, r)
		}), nil
	}, nil
}

// hinting adds the fix to a 403's one-line text body.
type hinting struct {
	http.ResponseWriter
	path      string
	forbidden bool
}

func (h *hinting) WriteHeader(code int) {
	h.forbidden = code == http.StatusForbidden
	h.ResponseWriter.WriteHeader(code)
}

func (h *hinting) Write(b []byte) (int, error) {
	if !h.forbidden {
		return h.ResponseWriter.Write(b)
	}
	h.forbidden = false // once
	msg := strings.TrimRight(string(b), "\n")
	if _, err := fmt.Fprintf(h.ResponseWriter, "%s: it may not get %s: bind a ClusterRole that allows it (the chart's %s) to it\n", msg, h.path, ReaderRole); err != nil {
		return 0, err
	}
	return len(b), nil
}
