// Package metricsauth guards the operator's /metrics as kube-apiserver guards its own: the
// caller's bearer token must pass a TokenReview, and the user it names must be allowed the
// request's verb on the URL path by a SubjectAccessReview. Verdicts are cached as
// controller-runtime's filter caches them (a token's review 1 minute, an allowed request 5
// minutes, a refused one 30 seconds), so that a scraper costs the apiserver two reviews every
// few minutes, not two per scrape. A 403 names the ClusterRole to bind.
//
// controller-runtime's filter does the same through k8s.io/apiserver's delegating
// authenticator and authorizer, which link an expression language (CEL) and much of an
// apiserver into the binary: 7.7 MB of code and tables of the operator's 68 MB, most of
// which the kernel maps in when they are touched around, for two HTTP calls.
package metricsauth

import (
	"context"
	"crypto/sha256"
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
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
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
	users     *cache.LRUExpireCache // sha256 of a token → *authenticationv1.UserInfo, nil when refused
	decisions *cache.LRUExpireCache // decisionKey → bool
}

// New guards with the given review clients; clk times the cached verdicts.
func New(tokens authenticationv1client.TokenReviewInterface, access authorizationv1client.SubjectAccessReviewInterface, clk clock.Clock) *Guard {
	return &Guard{
		tokens: tokens, access: access,
		users:     cache.NewLRUExpireCacheWithClock(cacheSize, clk),
		decisions: cache.NewLRUExpireCacheWithClock(cacheSize, clk),
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
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	token = strings.TrimSpace(token)
	if !ok || token == "" {
		return nil, errUnauthenticated
	}
	key := sha256.Sum256([]byte(token))
	if v, ok := g.users.Get(key); ok {
		if v == nil {
			return nil, errUnauthenticated
		}
		return v.(*authenticationv1.UserInfo), nil
	}
	ctx, cancel := contextFor(r)
	defer cancel()
	review, err := g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("TokenReview: %w", err)
	}
	if !review.Status.Authenticated {
		g.users.Add(key, nil, tokenTTL)
		return nil, errUnauthenticated
	}
	user := review.Status.User
	g.users.Add(key, &user, tokenTTL)
	return &user, nil
}

// authorize says whether user may verb the request's path, by a SubjectAccessReview (cached).
func (g *Guard) authorize(r *http.Request, user *authenticationv1.UserInfo, verb string) (bool, error) {
	key := decisionKeyOf(user, verb, r.URL.Path)
	if v, ok := g.decisions.Get(key); ok {
		return v.(bool), nil
	}
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
		return false, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	ttl := deniedTTL
	if res.Status.Allowed {
		ttl = allowedTTL
	}
	g.decisions.Add(key, res.Status.Allowed, ttl)
	return res.Status.Allowed, nil
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
