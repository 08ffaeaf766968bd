package authn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// reviewer stands for the Kubernetes API: it knows some tokens, records every token it is
// asked about, and fails while down is set.
type reviewer struct {
	users    map[string]string
	reviewed []string
	down     error
}

func (r *reviewer) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	r.reviewed = append(r.reviewed, tr.Spec.Token)
	if r.down != nil {
		return nil, r.down
	}
	out := tr.DeepCopy()
	if u, ok := r.users[tr.Spec.Token]; ok {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: u, Groups: tr.Spec.Audiences}}
	} else {
		out.Status.Error = "unknown token"
	}
	return out, nil
}

func TestReview(t *testing.T) {
	r := &reviewer{users: map[string]string{"good": "alice"}}
	for name, tc := range map[string]struct {
		token, down string
		wantUser    string
		wantErr     string
		wantUnauth  bool
	}{
		"accepted":                   {token: "good", wantUser: "alice"},
		"refused, with the reason":   {token: "bad", wantErr: "token rejected: unknown token", wantUnauth: true},
		"undecided: Kubernetes down": {token: "good", down: "connection refused", wantErr: "TokenReview: connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			r.down = nil
			if tc.down != "" {
				r.down = errors.New(tc.down)
			}
			u, err := Review(t.Context(), r, tc.token, []string{"aud"})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || errors.Is(err, ErrUnauthenticated) != tc.wantUnauth {
					t.Fatalf("Review(%s) = %v, %v; want error %q (unauthenticated: %v)", tc.token, u, err, tc.wantErr, tc.wantUnauth)
				}
				return
			}
			if err != nil || u.Username != tc.wantUser || !cmp.Equal(u.Groups, []string{"aud"}) {
				t.Fatalf("Review(%s) = %+v, %v; want %s asked for audience aud", tc.token, u, err, tc.wantUser)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc":      "abc",
		"bearer  abc ":    "abc",
		"Basic abc":       "",
		"Bearer":          "",
		"Bearer abc def":  "",
		"":                "",
		"BEARER t.o.k.en": "t.o.k.en",
	} {
		if got := BearerToken(header); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", header, got, want)
		}
	}
}

func TestKeyNeverHoldsTheToken(t *testing.T) {
	if a, again := Key("a"), Key("a"); Key("a", "b") == Key("ab") || Key("a", "b") == Key("a", "c") || a != again {
		t.Error("Key does not tell tokens and scopes apart exactly")
	}
	k := Key("secret-token")
	if string(k[:]) == "secret-token" || len(k) != 32 {
		t.Errorf("Key holds %q", k)
	}
}

// cachedReview is how the servers use Verdicts: a verdict on an accepted token kept ttl, on
// a refused one rejectedTTL, a failure to decide never.
func cachedReview(c *Verdicts[string], r *reviewer, token string, ttl, rejectedTTL time.Duration) (string, error) {
	return c.Do(Key(token), func() (string, time.Duration, error) {
		u, err := Review(context.Background(), r, token, nil)
		switch {
		case errors.Is(err, ErrUnauthenticated):
			return "", rejectedTTL, err
		case err != nil:
			return "", 0, err
		}
		return u.Username, ttl, nil
	})
}

func TestVerdicts(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	r := &reviewer{users: map[string]string{"good": "alice"}}
	c := NewVerdicts[string](clk, 2)
	for range 3 {
		if u, err := cachedReview(c, r, "good", 10*time.Second, 2*time.Second); err != nil || u != "alice" {
			t.Fatalf("review(good) = %v, %v", u, err)
		}
	}
	if len(r.reviewed) != 1 {
		t.Errorf("3 calls within the TTL reviewed the token %d times, want 1", len(r.reviewed))
	}
	clk.SetTime(clk.Now().Add(11 * time.Second))
	_, _ = cachedReview(c, r, "good", 10*time.Second, 2*time.Second)
	if len(r.reviewed) != 2 {
		t.Errorf("after the TTL the token was reviewed %d times in all, want 2", len(r.reviewed))
	}
	// A refusal is kept for its own, shorter time.
	for _, after := range []time.Duration{0, time.Second, 2 * time.Second} {
		clk.SetTime(clk.Now().Add(after))
		if _, err := cachedReview(c, r, "bad", 10*time.Second, 2*time.Second); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("review(bad) = %v, want ErrUnauthenticated", err)
		}
	}
	if diff := cmp.Diff([]string{"good", "good", "bad", "bad"}, r.reviewed); diff != "" {
		t.Errorf("tokens reviewed (-want +got):\n%s", diff)
	}
	// Failures to decide are not kept.
	r.down = errors.New("apiserver down")
	if _, err := cachedReview(c, r, "other", 10*time.Second, 2*time.Second); err == nil || errors.Is(err, ErrUnauthenticated) {
		t.Errorf("review while Kubernetes is down = %v", err)
	}
	r.down = nil
	if _, err := cachedReview(c, r, "other", 10*time.Second, 2*time.Second); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("review(other) after recovery = %v", err)
	}
	if n := c.Len(); n > 2 {
		t.Errorf("cache holds %d entries, more than 2", n)
	}
}

func TestVerdictsEvictLeastRecentlyUsed(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	r := &reviewer{users: map[string]string{"a": "alice", "b": "bob", "c": "carol"}}
	c := NewVerdicts[string](clk, 2)
	// a is used after b, so c's arrival pushes out b alone; a and c stay cached.
	for _, token := range []string{"a", "b", "a", "c", "a", "c", "b"} {
		if _, err := cachedReview(c, r, token, time.Minute, time.Minute); err != nil {
			t.Fatalf("review(%s) = %v", token, err)
		}
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "b"}, r.reviewed); diff != "" {
		t.Errorf("tokens reviewed (-want +got):\n%s", diff)
	}
}

func ExampleVerdicts() {
	c := NewVerdicts[string](clocktesting.NewFakePassiveClock(time.Unix(0, 0)), 100)
	for range 2 {
		u, _ := c.Do(Key("token", "job-a"), func() (string, time.Duration, error) {
			fmt.Println("reviewing")
			return "alice", time.Minute, nil
		})
		fmt.Println(u)
	}
	// Output:
	// reviewing
	// alice
	// alice
}
