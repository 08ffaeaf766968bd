package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// ErrUnauthenticated means the token is not valid: the caller must get a new one.
var ErrUnauthenticated = errors.New("token rejected")

// Authenticator maps a bearer token to an identity. It returns an error wrapping
// ErrUnauthenticated for a bad token, any other error when it could not decide.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*Identity, error)
}

// Chain tries each authenticator in turn; the first that accepts the token wins. A token
// every authenticator rejects is rejected; an authenticator that could not decide makes
// the chain fail with its error unless a later one accepts.
type Chain []Authenticator

// Authenticate implements Authenticator.
func (c Chain) Authenticate(ctx context.Context, token string) (*Identity, error) {
	var errs []error
	for _, a := range c {
		id, err := a.Authenticate(ctx, token)
		if err == nil {
			return id, nil
		}
		errs = append(errs, err)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrUnauthenticated) {
			return nil, err
		}
	}
	return nil, errors.Join(errs...)
}

// Cached remembers an authenticator's verdicts for a while, so that a busy client costs
// one TokenReview per TTL instead of one per request (as kube-apiserver's own webhook token
// authenticator does). Tokens are kept only as SHA-256 digests. Failures to decide are
// never cached. A full cache forgets its least recently used token.
type Cached struct {
	Authenticator
	Clock clock.PassiveClock
	// TTL of an accepted token, and of a rejected one.
	TTL, RejectedTTL time.Duration
	// MaxEntries bounds the memory the cache may take.
	MaxEntries int

	// Made on first use: callers fill the fields in a literal.
	once  sync.Once
	cache *cache.LRUExpireCache
}

type cachedVerdict struct {
	id  *Identity
	err error
}

// Authenticate implements Authenticator.
func (c *Cached) Authenticate(ctx context.Context, token string) (*Identity, error) {
	c.once.Do(func() {
		// The LRU cache needs a size; a MaxEntries of 0 has always kept one verdict.
		c.cache = cache.NewLRUExpireCacheWithClock(max(c.MaxEntries, 1), c.Clock)
	})
	key := sha256.Sum256([]byte(token))
	if v, ok := c.cache.Get(key); ok {
		v := v.(cachedVerdict)
		return v.id, v.err
	}
	id, err := c.Authenticator.Authenticate(ctx, token)
	ttl := c.TTL
	switch {
	case errors.Is(err, ErrUnauthenticated):
		ttl = c.RejectedTTL
	case err != nil:
		return nil, err
	}
	// A TTL of 0 turns caching off; the LRU cache would answer within the same clock tick.
	if ttl > 0 {
		c.cache.Add(key, cachedVerdict{id: id, err: err}, ttl)
	}
	return id, err
}
