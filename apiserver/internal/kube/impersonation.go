// Package kube is how the API server reaches Kubernetes: clients that act as the caller
// (impersonation), shared caches read with the server's own identity, and the
// SubjectAccessReviews that guard every read from those caches.
package kube

// The server acts as its caller: it impersonates users, their groups and UIDs, and
// ServiceAccounts. Add userextras/<key> for each key of --impersonate-extra-keys.
// +kubebuilder:rbac:groups="",resources=users;groups;serviceaccounts,verbs=impersonate
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=uids,verbs=impersonate

import (
	"errors"
	"net/http"
	"net/url"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/kiln-ml/kiln/apiserver/internal/auth"
)

// errNoCaller guards against acting with the server's own identity by mistake: a request
// whose context carries no caller is refused before it leaves the server.
var errNoCaller = errors.New("internal error: a Kubernetes call on a caller's behalf has no caller")

// impersonatingTransport sends each request as the caller found in its context.
type impersonatingTransport struct {
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t impersonatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	id := auth.FromContext(req.Context())
	if id == nil || id.User == "" {
		return nil, errNoCaller
	}
	req = req.Clone(req.Context())
	// Whatever the base transport would impersonate, the caller replaces it.
	for k := range req.Header {
		if len(k) > len("Impersonate-") && http.CanonicalHeaderKey(k[:len("Impersonate-")]) == "Impersonate-" {
			req.Header.Del(k)
		}
	}
	req.Header.Set(authenticationv1.ImpersonateUserHeader, id.User)
	if id.UID != "" {
		req.Header.Set(authenticationv1.ImpersonateUIDHeader, id.UID)
	}
	for _, g := range id.Groups {
		req.Header.Add(authenticationv1.ImpersonateGroupHeader, g)
	}
	for k, vs := range id.Extra {
		// Extra keys are case-insensitive and may hold characters headers cannot: escaped
		// as kube-apiserver expects.
		h := authenticationv1.ImpersonateUserExtraHeaderPrefix + url.PathEscape(k)
		for _, v := range vs {
			req.Header.Add(h, v)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		recordWarnings(req, resp)
	}
	return resp, err
}
