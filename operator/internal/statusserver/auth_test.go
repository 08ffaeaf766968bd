package statusserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// jwt is an unsigned token with these claims: what a caller can forge.
func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(payload) + "." + enc([]byte("sig"))
}

// A token that cannot be this job's by its own claims (no JWT, another audience, expired)
// is refused without a TokenReview: a flood of garbage tokens costs the Kubernetes API
// nothing, and the writes of real reports keep their budget. One whose claims look right is
// reviewed, and refused as Kubernetes says.
func TestTokensThatCannotBeThisJobsCostNoReview(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	reviews := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).Build(), interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			if tr, ok := obj.(*authnv1.TokenReview); ok {
				reviews++
				tr.Status = authnv1.TokenReviewStatus{Error: "invalid signature"}
			}
			return nil
		},
	})
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	a := NewAuthenticator(c, clocktesting.NewFakePassiveClock(now))
	job := types.NamespacedName{Namespace: "team", Name: "job"}
	aud := trainer.TokenAudience(job.Namespace, job.Name)
	for name, tc := range map[string]struct {
		token       string
		wantReviews int
		wantReason  string
	}{
		"garbage":          {token: "x", wantReason: "not a ServiceAccount token"},
		"not JSON inside":  {token: "a.b.c", wantReason: "not a ServiceAccount token"},
		"another audience": {token: jwt(t, map[string]any{"aud": []string{"https://kubernetes.default.svc"}}), wantReason: "is not this TrainJob's"},
		"no audience":      {token: jwt(t, map[string]any{"sub": "x"}), wantReason: "is not this TrainJob's"},
		"expired":          {token: jwt(t, map[string]any{"aud": aud, "exp": now.Add(-time.Minute).Unix()}), wantReason: "token expired at"},
		"forged, but it looks right": {token: jwt(t, map[string]any{"aud": []string{aud}, "exp": now.Add(time.Hour).Unix()}),
			wantReviews: 1, wantReason: "invalid signature"},
	} {
		t.Run(name, func(t *testing.T) {
			reviews = 0
			for range 3 {
				err := a.Authorize(t.Context(), "Bearer "+tc.token, job)
				if err == nil || err.code != http.StatusUnauthorized || !strings.Contains(err.reason, tc.wantReason) {
					t.Fatalf("Authorize = %v, want 401 saying %q", err, tc.wantReason)
				}
			}
			if reviews != tc.wantReviews {
				t.Errorf("%d TokenReviews for 3 posts, want %d", reviews, tc.wantReviews)
			}
		})
	}
}
