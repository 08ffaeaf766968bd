// Package metricsauth guards the operator's /metrics as kube-apiserver guards its own: the
// caller's bearer token must pass a TokenReview, and the user it names must be allowed the
// request's verb on the URL path by a SubjectAccessReview. Verdicts are cached as
// controller-runtime's filter caches them (a token's review 1 minute, an allowed request 5
// minutes, a refused one 30 seconds), so that a scraper costs the apiserver two reviews every
// few minutes, not two per scrape. A 403 names the ClusterRole to bind.
//
// controller-runtime's filter does the same through k8s.io/apiserver's delegating
// authenticator and authorizer, which link CEL and much of an apiserver into the binary,
// and so into its resident memory, for two HTTP calls (docs/performance.md, "The
// operator's metrics guard is its own").
package metricsauth

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kiln-ml/kiln/api/authn"
)

// ReaderRole is the chart's ClusterRole that allows a scrape.
const ReaderRole = "kiln-metrics-reader"

// How long verdicts are kept, and how many (LRU): controller-runtime's filter's durations.
const (
	tokenTTL   = time.Minute
	allowedTTL = 5 * time.Minute
	deniedTTL  = 30 * time.Second
	cacheSize  = 1024
	// reviewTimeout bounds one review, so that a scrape does not hang on the apiserver.
	reviewTimeout = 10 * time.Second
)

// Filter guards the metrics with reviews asked of the cluster that config (and httpClient)
// reach: controller-runtime's metricsserver.Options.FilterProvider.
func Filter(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("a client for the metrics' token and access reviews: %w", err)
	}
	g := New(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), clock.RealClock{})
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return g.Wrap(log, next), nil
	}, nil
}

// Guard answers a request itself (401, 403, 503) unless its caller is authenticated and
// authorized; then the wrapped handler answers.
type Guard struct {
	tokens    authenticationv1client.TokenReviewInterface
	access    authorizationv1client.SubjectAccessReviewInterface
	users     *authn.Verdicts[*authenticationv1.UserInfo] // by authn.Key of the token
	decisions *authn.Verdicts[bool]                       // by decisionKeyOf
}

// New guards with the given review clients; clk times the cached verdicts.
func New(tokens authenticationv1client.TokenReviewInterface, access authorizationv1client.SubjectAccessReviewInterface, clk clock.Clock) *Guard {
	return &Guard{
		tokens: tokens, access: access,
		users:     authn.NewVerdicts[*authenticationv1.UserInfo](clk, cacheSize),
		decisions: authn.NewVerdicts[bool](clk, cacheSize),
	}
}

// Wrap guards next; log records the reviews that failed.
func (g *Guard) Wrap(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, err := g.authenticate(r)
		if errors.Is(err, errUnauthenticated) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if err != nil {
			log.Error(err, "Reviewing the token of a metrics request")
			http.Error(w, "Service Unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		// What kube-apiserver authorizes a request to a non-resource URL for.
		verb := strings.ToLower(r.Method)
		allowed, err := g.authorize(r, user, verb)
		if err != nil {
			log.Error(err, "Reviewing the access of a metrics request", "user", user.Username)
			http.Error(w, "Service Unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !allowed {
			http.Error(w, fmt.Sprintf("Authorization denied for user %s: it may not %s %s: bind a ClusterRole that allows it (the chart's %s) to it",
				user.Username, verb, r.URL.Path, ReaderRole), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

var errUnauthenticated = errors.New("unauthenticated")

// authenticate returns who the request's bearer token is, by a TokenReview (cached).
func (g *Guard) authenticate(r *http.Request) (*authenticationv1.UserInfo, error) {
	token := authn.BearerToken(r.Header.Get("Authorization"))
	if token == "" {
		return nil, errUnauthenticated
	}
	return g.users.Do(authn.Key(token), func() (*authenticationv1.UserInfo, time.Duration, error) {
		ctx, cancel := contextFor(r)
		defer cancel()
		user, err := authn.Review(ctx, g.tokens, token, nil)
		switch {
		case errors.Is(err, authn.ErrUnauthenticated):
			return nil, tokenTTL, errUnauthenticated
		case err != nil:
			return nil, 0, err
		}
		return user, tokenTTL, nil
	})
}

// authorize says whether user may verb the request's path, by a SubjectAccessReview (cached).
func (g *Guard) authorize(r *http.Request, user *authenticationv1.UserInfo, verb string) (bool, error) {
	return g.decisions.Do(decisionKeyOf(user, verb, r.URL.Path), func() (bool, time.Duration, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: r.URL.Path, Verb: verb},
		}}
		if len(user.Extra) > 0 {
			sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
			for k, v := range user.Extra {
				sar.Spec.Extra[k] = authorizationv1.ExtraValue(v)
			}
		}
		ctx, cancel := contextFor(r)
		defer cancel()
		res, err := g.access.Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return false, 0, fmt.Errorf("SubjectAccessReview: %w", err)
		}
		if res.Status.Allowed {
			return true, allowedTTL, nil
		}
		return false, deniedTTL, nil
	})
}

// decisionKeyOf is everything a SubjectAccessReview of user's verb on path is asked with.
func decisionKeyOf(user *authenticationv1.UserInfo, verb, path string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q %q %q %q", user.Username, user.UID, user.Groups, verb, path)
	for _, k := range slices.Sorted(maps.Keys(user.Extra)) {
		fmt.Fprintf(&b, " %q=%q", k, []string(user.Extra[k]))
	}
	return b.String()
}

// contextFor is r's context, bounded for one review.
func contextFor(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), reviewTimeout)
}
