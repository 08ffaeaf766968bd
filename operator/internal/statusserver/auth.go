package statusserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kiln-ml/kiln/api/authn"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// The status server asks the Kubernetes API who a token is, and reads the pod it is bound to.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=pods,verbs=get

// Extra keys of a pod-bound ServiceAccount token's user (TokenReview).
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// How long a verdict on a token is kept: a granted one ten minutes (at most until the token
// expires; the kubelet rotates it well before), so that a thousand chatty trainers cost
// under two TokenReviews a second and the status server's budget goes to their writes
// (docs/performance.md, "The status server's token reviews"); a refused one a few seconds, so
// that a fixed token works soon while a broken trainer cannot flood the API.
// A granted verdict is for one token and one TrainJob: kept after its pod is gone, it lets
// that pod, which was the job's, report for the job a little longer, and nothing else.
const (
	grantedTTL    = 10 * time.Minute
	refusedTTL    = 5 * time.Second
	maxCachedAuth = 50_000
)

// authError is why a request is refused: 401 (who it is is unknown) or 403 (known, and not
// allowed), with a reason for the trainer's log.
type authError struct {
	code   int
	reason string
}

func (e *authError) Error() string { return e.reason }

// noVerdict is a review that did not conclude: the Kubernetes API did not answer within the
// request's time (the server's own client queues its calls under --status-server-qps) or
// failed. The trainer is told to retry (503); nothing is cached.
func noVerdict(doing string, err error) *authError {
	return &authError{code: http.StatusServiceUnavailable, reason: fmt.Sprintf(
		"the status server could not check the token now (%s: %v); it checks each trainer's token once and then keeps "+
			"the verdict, so retry after the Retry-After seconds (many trainers starting at once wait for its API budget, "+
			"the operator's --status-server-qps)", doing, err)}
}

func unauthorized(format string, args ...any) *authError {
	return &authError{code: http.StatusUnauthorized, reason: fmt.Sprintf(format, args...)}
}

func forbidden(format string, args ...any) *authError {
	return &authError{code: http.StatusForbidden, reason: fmt.Sprintf(format, args...)}
}

// Authenticator decides whether a bearer token may update one TrainJob's status.
type Authenticator struct {
	client client.Client
	clock  clock.PassiveClock
	// verdicts by token and job: nil (granted) or why not.
	verdicts *authn.Verdicts[*authError]
}

// NewAuthenticator asks the Kubernetes API through c (TokenReviews, pods).
func NewAuthenticator(c client.Client, clk clock.PassiveClock) *Authenticator {
	return &Authenticator{client: c, clock: clk, verdicts: authn.NewVerdicts[*authError](clk, maxCachedAuth)}
}

// tokenReviews creates TokenReviews through the status server's own client.
type tokenReviews struct{ client.Client }

func (c tokenReviews) Create(ctx context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	return tr, c.Client.Create(ctx, tr)
}

// Authorize returns nil when the Authorization header carries a token that may update the
// status of TrainJob job, else why not.
func (a *Authenticator) Authorize(ctx context.Context, header string, job types.NamespacedName) *authError {
	token := authn.BearerToken(header)
	if token == "" {
		return unauthorized("no bearer token: send the token of the file named by %s as \"Authorization: Bearer <token>\"", trainer.EnvStatusServerToken)
	}
	verdict, _ := a.verdicts.Do(authn.Key(token, job.String()), func() (*authError, time.Duration, error) {
		claims, ok := peekClaims(token)
		// What the token says of itself can only refuse it, never grant it: a token that
		// cannot be this job's costs no TokenReview (a flood of garbage tokens would
		// otherwise spend the budget the reports' writes need).
		if err := notThisJobs(ok, claims, job, a.clock.Now()); err != nil {
			return err, refusedTTL, nil
		}
		err := a.review(ctx, token, job)
		switch {
		case err != nil && err.code == http.StatusServiceUnavailable:
			return err, 0, nil // not a verdict: ask again next time
		case err != nil:
			return err, refusedTTL, nil
		case claims.Expiry > 0:
			return nil, min(grantedTTL, time.Unix(claims.Expiry, 0).Sub(a.clock.Now())), nil
		}
		return nil, grantedTTL, nil
	})
	return verdict
}

// notThisJobs refuses a token whose own, unverified claims show it cannot be a token for
// job: not a JWT, another audience, or expired. Nil when only Kubernetes can tell.
func notThisJobs(isJWT bool, claims tokenClaims, job types.NamespacedName, now time.Time) *authError {
	audience := trainer.TokenAudience(job.Namespace, job.Name)
	switch {
	case !isJWT:
		return unauthorized("not a ServiceAccount token (a JWT): send the token of the file named by %s, read again for each request", trainer.EnvStatusServerToken)
	case claims.Expiry > 0 && !now.Before(time.Unix(claims.Expiry, 0)):
		return unauthorized("token expired at %s: the kubelet renews the file named by %s, read it again for each request",
			time.Unix(claims.Expiry, 0).UTC().Format(time.RFC3339), trainer.EnvStatusServerToken)
	case !slices.Contains(claims.Audience, audience):
		return unauthorized("token audience %q is not this TrainJob's %q: the token is for another TrainJob or another server",
			strings.Join(claims.Audience, ","), audience)
	}
	return nil
}

func (a *Authenticator) review(ctx context.Context, token string, job types.NamespacedName) *authError {
	// Bounded: the trainer's post waits for this review.
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	audience := trainer.TokenAudience(job.Namespace, job.Name)
	user, err := authn.Review(ctx, tokenReviews{a.client}, token, []string{audience})
	if err != nil && !errors.Is(err, authn.ErrUnauthenticated) {
		return noVerdict("reviewing the token", err)
	}
	if err != nil {
		return unauthorized("%v", err) // its own claims looked right (notThisJobs): Kubernetes says why
	}
	ns, sa, ok := serviceAccount(user.Username)
	if !ok {
		return forbidden("%s is not a ServiceAccount: only a pod of TrainJob %s may report its status", user.Username, job)
	}
	if ns != job.Namespace {
		return forbidden("token of ServiceAccount %s/%s, whose namespace is not the TrainJob's (%s)", ns, sa, job.Namespace)
	}
	pod, podUID := first(user.Extra[extraPodName]), first(user.Extra[extraPodUID])
	if pod == "" {
		return forbidden("token of ServiceAccount %s/%s is not bound to a pod: only a pod of TrainJob %s may report its status", ns, sa, job)
	}
	p := &corev1.Pod{}
	if err := a.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pod}, p); apierrors.IsNotFound(err) {
		return forbidden("token bound to pod %s/%s, which no longer exists", ns, pod)
	} else if err != nil {
		return noVerdict(fmt.Sprintf("reading pod %s/%s", ns, pod), err)
	}
	if string(p.UID) != podUID {
		return forbidden("token bound to an earlier pod named %s/%s", ns, pod)
	}
	if owner := p.Labels[jobsetv1alpha2.JobSetNameKey]; owner != job.Name {
		return forbidden("token bound to pod %s/%s, which is not a pod of TrainJob %s", ns, pod, job)
	}
	return nil
}

func serviceAccount(username string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(username, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok
}

func first(v authnv1.ExtraValue) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// tokenClaims are the claims of a JWT read WITHOUT verifying it: only to explain why the
// Kubernetes API refused the token, never to decide.
type tokenClaims struct {
	Expiry   int64
	Audience []string
}

// peekClaims reads a JWT's claims; ok is false when token is no JWT.
func peekClaims(token string) (claims tokenClaims, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return tokenClaims{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return tokenClaims{}, false
	}
	var raw struct {
		Exp int64           `json:"exp"`
		Aud json.RawMessage `json:"aud"`
	}
	if json.Unmarshal(payload, &raw) != nil {
		return tokenClaims{}, false
	}
	out := tokenClaims{Expiry: raw.Exp}
	var one string
	if json.Unmarshal(raw.Aud, &one) == nil {
		out.Audience = []string{one}
	} else {
		_ = json.Unmarshal(raw.Aud, &out.Audience)
	}
	return out, true
}
