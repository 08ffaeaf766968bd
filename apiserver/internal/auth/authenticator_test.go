package auth

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

type countingAuth struct {
	calls int
	// reviewed are the tokens asked about, in order.
	reviewed []string
	users    map[string]string
	err      error
}

func (c *countingAuth) Authenticate(_ context.Context, token string) (*Identity, error) {
	c.calls++
	c.reviewed = append(c.reviewed, token)
	if c.err != nil {
		return nil, c.err
	}
	if u, ok := c.users[token]; ok {
		return &Identity{User: u}, nil
	}
	return nil, fmt.Errorf("%w: unknown", ErrUnauthenticated)
}

func TestCached(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	inner := &countingAuth{users: map[string]string{"good": "alice"}}
	c := &Cached{Authenticator: inner, Clock: clk, TTL: 10 * time.Second, RejectedTTL: 2 * time.Second, MaxEntries: 2}
	ctx := context.Background()
	for range 3 {
		if id, err := c.Authenticate(ctx, "good"); err != nil || id.User != "alice" {
			t.Fatalf("Authenticate(good) = %v, %v", id, err)
		}
	}
	if inner.calls != 1 {
		t.Errorf("3 calls within the TTL reviewed the token %d times, want 1", inner.calls)
	}
	clk.SetTime(clk.Now().Add(11 * time.Second))
	_, _ = c.Authenticate(ctx, "good")
	if inner.calls != 2 {
		t.Errorf("after the TTL the token was reviewed %d times in all, want 2", inner.calls)
	}
	if _, err := c.Authenticate(ctx, "bad"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("Authenticate(bad) = %v, want ErrUnauthenticated", err)
	}
	// Failures to decide are not cached.
	inner.err = errors.New("apiserver down")
	if _, err := c.Authenticate(ctx, "other"); err == nil || errors.Is(err, ErrUnauthenticated) {
		t.Errorf("Authenticate() while Kubernetes is down = %v", err)
	}
	inner.err = nil
	if _, err := c.Authenticate(ctx, "other"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("Authenticate(other) after recovery = %v", err)
	}
	if n := c.verdicts.Len(); n > c.MaxEntries {
		t.Errorf("cache holds %d entries, more than %d", n, c.MaxEntries)
	}
}

func TestCachedTTL(t *testing.T) {
	for name, tc := range map[string]struct {
		token string
		// after is how long after the first call the second comes.
		after        time.Duration
		wantUser     string // "" when rejected
		wantReviewed []string
	}{
		"accepted, within the TTL":          {token: "good", after: 9 * time.Second, wantUser: "alice", wantReviewed: []string{"good"}},
		"accepted, after the TTL":           {token: "good", after: 11 * time.Second, wantUser: "alice", wantReviewed: []string{"good", "good"}},
		"rejected, within the rejected TTL": {token: "bad", after: time.Second, wantReviewed: []string{"bad"}},
		"rejected, after the rejected TTL":  {token: "bad", after: 3 * time.Second, wantReviewed: []string{"bad", "bad"}},
	} {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
			inner := &countingAuth{users: map[string]string{"good": "alice"}}
			c := &Cached{Authenticator: inner, Clock: clk, TTL: 10 * time.Second, RejectedTTL: 2 * time.Second, MaxEntries: 10}
			for i, after := range []time.Duration{0, tc.after} {
				clk.SetTime(clk.Now().Add(after))
				id, err := c.Authenticate(t.Context(), tc.token)
				switch {
				case tc.wantUser == "" && !errors.Is(err, ErrUnauthenticated):
					t.Errorf("call %d: Authenticate(%s) = %v, %v; want ErrUnauthenticated", i+1, tc.token, id, err)
				case tc.wantUser != "" && (err != nil || id.User != tc.wantUser):
					t.Errorf("call %d: Authenticate(%s) = %v, %v; want %s", i+1, tc.token, id, err, tc.wantUser)
				}
			}
			if diff := cmp.Diff(tc.wantReviewed, inner.reviewed); diff != "" {
				t.Errorf("tokens reviewed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChain(t *testing.T) {
	a := &countingAuth{users: map[string]string{"a": "alice"}}
	b := &countingAuth{users: map[string]string{"b": "bob"}}
	ctx := context.Background()
	if id, err := (Chain{a, b}).Authenticate(ctx, "b"); err != nil || id.User != "bob" {
		t.Errorf("Chain.Authenticate(b) = %v, %v", id, err)
	}
	if _, err := (Chain{a, b}).Authenticate(ctx, "c"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("Chain.Authenticate(c) = %v, want ErrUnauthenticated", err)
	}
	down := &countingAuth{err: errors.New("down")}
	if _, err := (Chain{a, down}).Authenticate(ctx, "c"); err == nil || errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a chain that could not decide = %v, want a non-authentication error", err)
	}
	if id, err := (Chain{down, a}).Authenticate(ctx, "a"); err != nil || id.User != "alice" {
		t.Errorf("a later authenticator's acceptance = %v, %v", id, err)
	}
}

func TestIdentityKey(t *testing.T) {
	a := &Identity{User: "u", Groups: []string{"g1", "g2"}, Extra: map[string][]string{"x": {"1"}, "y": {"2"}}}
	b := &Identity{User: "u", Groups: []string{"g1", "g2"}, Extra: map[string][]string{"y": {"2"}, "x": {"1"}}}
	c := &Identity{User: "u", Groups: []string{"g1g2"}}
	if a.Key() != b.Key() || a.Key() == c.Key() {
		t.Errorf("Key() does not tell identities apart exactly")
	}
}
