package metricsauth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// cluster answers the guard's reviews as a cluster with two ServiceAccounts would: the token
// "reader" is system:serviceaccount:mon:prometheus, who may get /metrics; "nobody" is
// system:serviceaccount:mon:nobody, who may not; any other token is refused. fail makes
// every review fail.
type cluster struct {
	tokenReviews, accessReviews int
	asked                       []authorizationv1.SubjectAccessReviewSpec
	fail                        bool
}

func (c *cluster) guard(clk *clocktesting.FakeClock) *Guard {
	cs := kubefake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		c.tokenReviews++
		if c.fail {
			return true, nil, errors.New("connection refused")
		}
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		switch tr.Spec.Token {
		case "reader":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: "system:serviceaccount:mon:prometheus", UID: "u1", Groups: []string{"system:serviceaccounts"},
				Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}},
			}}
		case "nobody":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:mon:nobody"}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		c.accessReviews++
		if c.fail {
			return true, nil, errors.New("connection refused")
		}
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		c.asked = append(c.asked, sar.Spec)
		sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:mon:prometheus" &&
			sar.Spec.NonResourceAttributes != nil && *sar.Spec.NonResourceAttributes == authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}
		return true, sar, nil
	})
	return New(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), clk)
}

func scrape(g *Guard, token string) *httptest.ResponseRecorder {
	h := g.Wrap(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("kiln_build_info 1\n"))
	}))
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestOnlyAnAuthorizedScraperGetsTheMetrics(t *testing.T) {
	cases := map[string]struct {
		token    string
		code     int
		body     string
		reviewed int // TokenReviews, then SubjectAccessReviews
	}{
		"no token":        {"", http.StatusUnauthorized, "Unauthorized\n", 0},
		"a token refused": {"forged", http.StatusUnauthorized, "Unauthorized\n", 1},
		"not allowed": {"nobody", http.StatusForbidden,
			"Authorization denied for user system:serviceaccount:mon:nobody: it may not get /metrics: bind a ClusterRole that allows it (the chart's kiln-metrics-reader) to it\n", 2},
		"allowed": {"reader", http.StatusOK, "kiln_build_info 1\n", 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &cluster{}
			rec := scrape(c.guard(clocktesting.NewFakeClock(time.Now())), tc.token)
			if rec.Code != tc.code || rec.Body.String() != tc.body {
				t.Errorf("answered %d %q, want %d %q", rec.Code, rec.Body.String(), tc.code, tc.body)
			}
			if c.tokenReviews+c.accessReviews != tc.reviewed {
				t.Errorf("asked %d token and %d access reviews, want %d in all", c.tokenReviews, c.accessReviews, tc.reviewed)
			}
		})
	}
}

func TestTheAccessReviewAsksForTheWholeUser(t *testing.T) {
	c := &cluster{}
	scrape(c.guard(clocktesting.NewFakeClock(time.Now())), "reader")
	if len(c.asked) != 1 {
		t.Fatalf("asked %d access reviews, want 1", len(c.asked))
	}
	got := c.asked[0]
	if got.User != "system:serviceaccount:mon:prometheus" || got.UID != "u1" || strings.Join(got.Groups, ",") != "system:serviceaccounts" ||
		got.Extra["authentication.kubernetes.io/pod-name"][0] != "prometheus-0" || got.ResourceAttributes != nil {
		t.Errorf("asked %+v", got)
	}
}

func TestVerdictsAreCachedForTheirTime(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c := &cluster{}
	g := c.guard(clk)
	for range 5 {
		if rec := scrape(g, "reader"); rec.Code != http.StatusOK {
			t.Fatalf("answered %d", rec.Code)
		}
		if rec := scrape(g, "nobody"); rec.Code != http.StatusForbidden {
			t.Fatalf("answered %d", rec.Code)
		}
		if rec := scrape(g, "forged"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("answered %d", rec.Code)
		}
	}
	if c.tokenReviews != 3 || c.accessReviews != 2 {
		t.Fatalf("15 scrapes by 3 callers asked %d token and %d access reviews, want 3 and 2", c.tokenReviews, c.accessReviews)
	}
	// Past the token's minute, its review is asked again; the refusal's 30 s are past too,
	// the permission's 5 minutes are not.
	clk.Step(tokenTTL + time.Second)
	scrape(g, "reader")
	scrape(g, "nobody")
	if c.tokenReviews != 5 || c.accessReviews != 3 {
		t.Errorf("after a minute: %d token and %d access reviews, want 5 and 3", c.tokenReviews, c.accessReviews)
	}
}

func TestAFailedReviewIsAnsweredUnavailableAndNotKept(t *testing.T) {
	c := &cluster{fail: true}
	g := c.guard(clocktesting.NewFakeClock(time.Now()))
	rec := scrape(g, "reader")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "TokenReview: connection refused") {
		t.Errorf("answered %d %q", rec.Code, rec.Body.String())
	}
	c.fail = false
	if rec := scrape(g, "reader"); rec.Code != http.StatusOK {
		t.Errorf("once the apiserver answers: %d %q", rec.Code, rec.Body.String())
	}
}
