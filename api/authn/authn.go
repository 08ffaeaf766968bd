// Package authn is how every Kiln server learns who a bearer token belongs to: a
// TokenReview asked of Kubernetes, and a bounded cache of the verdicts, so that a busy
// caller costs one review per TTL instead of one per request (as kube-apiserver's own
// webhook token authenticator does). The API server, the operator's status server and its
// metrics endpoint all use it.
package authn

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// ErrUnauthenticated means Kubernetes does not accept the token: the caller must get a new
// one. Any other error of Review means it could not decide.
var ErrUnauthenticated = errors.New("token rejected")

// TokenReviews creates TokenReviews: client-go's typed client is one.
type TokenReviews interface {
	Create(ctx context.Context, review *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// Review asks Kubernetes who token belongs to, for audiences (none: the apiserver's own).
// A token Kubernetes refuses is an error wrapping ErrUnauthenticated with its reason.
func Review(ctx context.Context, reviews TokenReviews, token string, audiences []string) (*authenticationv1.UserInfo, error) {
	review, err := reviews.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("TokenReview: %w", err)
	}
	if !review.Status.Authenticated {
		msg := review.Status.Error
		if msg == "" {
			msg = "Kubernetes does not know this token"
		}
		return nil, fmt.Errorf("%w: %s", ErrUnauthenticated, msg)
	}
	return &review.Status.User, nil
}

// BearerToken returns the credentials of an RFC 7235 "Bearer" Authorization header, ""
// when there are none.
func BearerToken(header string) string {
	parts := strings.Fields(header)
	if len(parts) != 2 || !strings.EqualFold(parts[0], "Bearer") {
		return ""
	}
	return parts[1]
}

// Key is what a verdict on token is kept under: a SHA-256 digest of the token and of what
// else the verdict depends on (an audience, a job), never the token itself.
func Key(token string, scope ...string) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(token))
	for _, s := range scope {
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// Verdicts is a bounded cache of verdicts, each kept for the time its review gives: a full
// cache forgets its least recently used entry.
type Verdicts[V any] struct {
	cache *cache.LRUExpireCache
}

type verdict[V any] struct {
	v   V
	err error
}

// NewVerdicts keeps at most maxEntries verdicts (at least one), timed by clk.
func NewVerdicts[V any](clk clock.PassiveClock, maxEntries int) *Verdicts[V] {
	return &Verdicts[V]{cache: cache.NewLRUExpireCacheWithClock(max(maxEntries, 1), clk)}
}

// Do returns the verdict kept under key (see Key) while it lasts, else review's, which it
// keeps for the time review gives with it. A review that could not decide (Kubernetes did
// not answer) returns a time of 0: nothing is kept, and the next call asks again.
func (c *Verdicts[V]) Do(key any, review func() (V, time.Duration, error)) (V, error) {
	if got, ok := c.cache.Get(key); ok {
		kept := got.(verdict[V])
		return kept.v, kept.err
	}
	v, ttl, err := review()
	// A TTL of 0 keeps nothing: the LRU cache would still answer within the same clock tick.
	if ttl > 0 {
		c.cache.Add(key, verdict[V]{v: v, err: err}, ttl)
	}
	return v, err
}

// Len is how many verdicts are kept, expired ones included until they are looked up.
func (c *Verdicts[V]) Len() int { return len(c.cache.Keys()) }
