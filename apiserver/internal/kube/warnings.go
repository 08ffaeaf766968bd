package kube

import (
	"context"
	"net/http"
	"slices"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Warnings are what Kubernetes warned of while serving one call of the API server (the
// Warning headers of its answers: admission webhooks' warnings, deprecations), to hand to
// the caller as kubectl would print them.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

type warningsKey struct{}

// CollectWarnings returns a context whose Kubernetes calls on the caller's behalf record
// their warnings in the returned Warnings.
func CollectWarnings(ctx context.Context) (context.Context, *Warnings) {
	w := &Warnings{}
	return context.WithValue(ctx, warningsKey{}, w), w
}

// Add records a warning of the API server's own, once.
func (w *Warnings) Add(text string) {
	if w == nil || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.list, text) {
		w.list = append(w.list, text)
	}
}

// List is every warning recorded, in order, each once.
func (w *Warnings) List() []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.list)
}

// recordWarnings adds the Warning headers of resp to the Warnings of its request's context.
func recordWarnings(req *http.Request, resp *http.Response) {
	w, _ := req.Context().Value(warningsKey{}).(*Warnings)
	if w == nil || resp == nil {
		return
	}
	headers, _ := utilnet.ParseWarningHeaders(resp.Header.Values("Warning"))
	for _, h := range headers {
		w.Add(h.Text)
	}
}
