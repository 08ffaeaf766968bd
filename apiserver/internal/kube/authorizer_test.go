package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kiln-ml/kiln/apiserver/internal/auth"
)

// fakeReviews answers SubjectAccessReviews as RBAC does: a user may get what allowed lists,
// by resource (every object of it) or as resource/name (that one only).
type fakeReviews struct {
	authorizationclient.SubjectAccessReviewInterface
	allowed map[string][]string
	err     error
	// reviewed are the reviews asked for, as "user verb resource", in order.
	reviewed []string
}

func (f *fakeReviews) Create(_ context.Context, sar *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	ra := sar.Spec.ResourceAttributes
	what := ra.Resource
	if ra.Name != "" {
		what += "/" + ra.Name
	}
	f.reviewed = append(f.reviewed, sar.Spec.User+" "+ra.Verb+" "+what)
	if f.err != nil {
		return nil, f.err
	}
	out := sar.DeepCopy()
	for _, r := range f.allowed[sar.Spec.User] {
		if (r == ra.Resource || ra.Name != "" && r == what) && ra.Verb == "get" {
			out.Status.Allowed = true
			return out, nil
		}
	}
	out.Status.Reason = "no RBAC policy matched"
	return out, nil
}

func asUser(ctx context.Context, user string) context.Context {
	return auth.WithIdentity(ctx, &auth.Identity{User: user})
}

func TestAuthorizerTTL(t *testing.T) {
	for name, tc := range map[string]struct {
		resource string
		// after is how long after the first call the second comes.
		after        time.Duration
		wantAllowed  bool
		wantReason   string
		wantReviewed []string
	}{
		"allowed, within the TTL": {resource: "trainjobs", after: 9 * time.Second, wantAllowed: true,
			wantReviewed: []string{"alice get trainjobs"}},
		"allowed, after the TTL": {resource: "trainjobs", after: 11 * time.Second, wantAllowed: true,
			wantReviewed: []string{"alice get trainjobs", "alice get trainjobs"}},
		"denied, within the TTL": {resource: "pods", after: 9 * time.Second, wantReason: "no RBAC policy matched",
			wantReviewed: []string{"alice get pods"}},
		"denied, after the TTL": {resource: "pods", after: 11 * time.Second, wantReason: "no RBAC policy matched",
			wantReviewed: []string{"alice get pods", "alice get pods"}},
	} {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
			reviews := &fakeReviews{allowed: map[string][]string{"alice": {"trainjobs"}}}
			a := &Authorizer{Client: reviews, Clock: clk, TTL: 10 * time.Second, MaxEntries: 10}
			ctx := asUser(t.Context(), "alice")
			for i, after := range []time.Duration{0, tc.after} {
				clk.SetTime(clk.Now().Add(after))
				allowed, reason, err := a.Allowed(ctx, Attributes{Verb: "get", Resource: tc.resource, Namespace: "team"})
				if err != nil || allowed != tc.wantAllowed || reason != tc.wantReason {
					t.Errorf("call %d: Allowed() = %v, %q, %v; want %v, %q", i+1, allowed, reason, err, tc.wantAllowed, tc.wantReason)
				}
			}
			if diff := cmp.Diff(tc.wantReviewed, reviews.reviewed); diff != "" {
				t.Errorf("reviews (-want +got):\n%s", diff)
			}
		})
	}
}

// An object's name is asked only where the caller may not read every object of the kind:
// reading many objects costs one review per TTL, not one per object.
func TestAuthorizerAsksForEveryNameFirst(t *testing.T) {
	reviews := &fakeReviews{allowed: map[string][]string{"alice": {"trainjobs"}, "bob": {"trainjobs/mine"}}}
	a := &Authorizer{Client: reviews, Clock: clocktesting.NewFakePassiveClock(time.Unix(0, 0)), TTL: time.Minute, MaxEntries: 10}
	check := func(user, name string, want bool, wantReason string) {
		t.Helper()
		ok, reason, err := a.Allowed(asUser(t.Context(), user), Attributes{Verb: "get", Resource: "trainjobs", Namespace: "team", Name: name})
		if err != nil || ok != want || reason != wantReason {
			t.Errorf("%s get trainjobs/%s: Allowed() = %v, %q, %v; want %v, %q", user, name, ok, reason, err, want, wantReason)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		check("alice", name, true, "")
	}
	check("bob", "mine", true, "")
	check("bob", "other", false, "no RBAC policy matched")
	want := []string{"alice get trainjobs", "bob get trainjobs", "bob get trainjobs/mine", "bob get trainjobs/other"}
	if diff := cmp.Diff(want, reviews.reviewed); diff != "" {
		t.Errorf("reviews (-want +got):\n%s", diff)
	}
}

func TestAuthorizerEvictsLeastRecentlyUsed(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	reviews := &fakeReviews{allowed: map[string][]string{"alice": {"trainjobs"}}}
	a := &Authorizer{Client: reviews, Clock: clk, TTL: time.Minute, MaxEntries: 2}
	ctx := asUser(t.Context(), "alice")
	// trainjobs is used after pods, so services' arrival pushes out pods alone.
	for _, resource := range []string{"trainjobs", "pods", "trainjobs", "services", "trainjobs", "services", "pods"} {
		if _, _, err := a.Allowed(ctx, Attributes{Verb: "get", Resource: resource}); err != nil {
			t.Fatalf("Allowed(get %s) = %v", resource, err)
		}
	}
	want := []string{"alice get trainjobs", "alice get pods", "alice get services", "alice get pods"}
	if diff := cmp.Diff(want, reviews.reviewed); diff != "" {
		t.Errorf("reviews (-want +got):\n%s", diff)
	}
}

func TestAuthorizerCachesPerCaller(t *testing.T) {
	reviews := &fakeReviews{allowed: map[string][]string{"alice": {"trainjobs"}}}
	a := &Authorizer{Client: reviews, Clock: clocktesting.NewFakePassiveClock(time.Unix(0, 0)), TTL: time.Minute, MaxEntries: 10}
	attrs := Attributes{Verb: "get", Resource: "trainjobs", Namespace: "team"}
	if ok, _, err := a.Allowed(asUser(t.Context(), "alice"), attrs); err != nil || !ok {
		t.Errorf("alice: Allowed() = %v, %v; want true", ok, err)
	}
	// Bob must not get alice's cached verdict.
	if ok, _, err := a.Allowed(asUser(t.Context(), "bob"), attrs); err != nil || ok {
		t.Errorf("bob: Allowed() = %v, %v; want false", ok, err)
	}
	// Failures to decide are not cached.
	reviews.err = errors.New("apiserver down")
	if _, _, err := a.Allowed(asUser(t.Context(), "carol"), attrs); err == nil {
		t.Errorf("carol while Kubernetes is down: no error")
	}
	reviews.err = nil
	if ok, _, err := a.Allowed(asUser(t.Context(), "carol"), attrs); err != nil || ok {
		t.Errorf("carol after recovery: Allowed() = %v, %v; want false", ok, err)
	}
	if _, _, err := a.Allowed(t.Context(), attrs); !errors.Is(err, errNoCaller) {
		t.Errorf("no caller: Allowed() = %v, want errNoCaller", err)
	}
	want := []string{"alice get trainjobs", "bob get trainjobs", "carol get trainjobs", "carol get trainjobs"}
	if diff := cmp.Diff(want, reviews.reviewed); diff != "" {
		t.Errorf("reviews (-want +got):\n%s", diff)
	}
}
