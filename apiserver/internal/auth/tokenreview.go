package auth

// Callers are authenticated by their bearer tokens.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// TokenReview asks Kubernetes who a token belongs to: ServiceAccount tokens, and whatever
// else the cluster's apiserver accepts (its OIDC issuer, webhook token authenticators).
type TokenReview struct {
	Client authenticationclient.TokenReviewInterface
	// Audiences the token must be issued for; empty accepts the apiserver's own.
	Audiences []string
}

// Authenticate implements Authenticator.
func (t TokenReview) Authenticate(ctx context.Context, token string) (*Identity, error) {
	review, err := t.Client.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: t.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("reviewing the token with Kubernetes: %w", err)
	}
	if !review.Status.Authenticated {
		msg := review.Status.Error
		if msg == "" {
			msg = "Kubernetes does not know this token"
		}
		return nil, fmt.Errorf("%w: %s", ErrUnauthenticated, msg)
	}
	u := review.Status.User
	id := &Identity{User: u.Username, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		id.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			id.Extra[k] = v
		}
	}
	return id, nil
}
