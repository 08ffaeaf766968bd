// Package auth authenticates callers: it turns the bearer token of each request into the
// Kubernetes identity that every call on the caller's behalf impersonates.
package auth

import (
	"context"
	"slices"
	"strings"
)

// Identity is a caller as Kubernetes knows it.
type Identity struct {
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Key identifies the identity in caches: two requests with equal keys are the same
// caller for Kubernetes authorization.
func (id *Identity) Key() string {
	var b strings.Builder
	b.WriteString(id.User)
	b.WriteByte(0)
	b.WriteString(id.UID)
	for _, g := range id.Groups {
		b.WriteByte(0)
		b.WriteString(g)
	}
	keys := make([]string, 0, len(id.Extra))
	for k := range id.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteByte(1)
		b.WriteString(k)
		for _, v := range id.Extra[k] {
			b.WriteByte(0)
			b.WriteString(v)
		}
	}
	return b.String()
}

// withExtras returns the identity with only the extras of these keys.
func (id *Identity) withExtras(keys []string) *Identity {
	if len(id.Extra) == 0 {
		return id
	}
	out := *id
	out.Extra = nil
	for _, k := range keys {
		if v, ok := id.Extra[k]; ok {
			if out.Extra == nil {
				out.Extra = map[string][]string{}
			}
			out.Extra[k] = v
		}
	}
	return &out
}

type identityKey struct{}

// Recorder receives the caller once a call is authenticated, for code that wraps the
// authentication (such as a log of every call) and so cannot read it from the context.
type Recorder struct {
	ID *Identity
}

type recorderKey struct{}

// WithRecorder returns ctx with r, which the Interceptor fills.
func WithRecorder(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// WithIdentity returns ctx carrying the authenticated caller.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the authenticated caller of a request, or nil.
func FromContext(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}
