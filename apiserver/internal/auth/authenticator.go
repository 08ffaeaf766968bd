package auth

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/kiln-ml/kiln/api/authn"
)

// ErrUnauthenticated means the token is not valid: the caller must get a new one.
var ErrUnauthenticated = authn.ErrUnauthenticated

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

// Cached remembers an authenticator's verdicts for a while (authn.Verdicts), so that a busy
// client costs one TokenReview per TTL instead of one per request. Failures to decide are
// never cached.
type Cached struct {
	Authenticator
	Clock clock.PassiveClock
	// TTL of an accepted token, and of a rejected one.
	TTL, RejectedTTL time.Duration
	// MaxEntries bounds the memory the cache may take.
	MaxEntries int

	// Made on first use: callers fill the fields in a literal.
	once     sync.Once
	verdicts *authn.Verdicts[*Identity]
}

// Authenticate implements Authenticator.
func (c *Cached) Authenticate(ctx context.Context, token string) (*Identity, error) {
	c.once.Do(func() { c.verdicts = authn.NewVerdicts[*Identity](c.Clock, c.MaxEntries) })
	return c.verdicts.Do(authn.Key(token), func() (*Identity, time.Duration, error) {
		id, err := c.Authenticator.Authenticate(ctx, token)
		switch {
		case errors.Is(err, ErrUnauthenticated):
			return nil, c.RejectedTTL, err
		case err != nil:
			return nil, 0, err
		}
		return id, c.TTL, nil
	})
}
