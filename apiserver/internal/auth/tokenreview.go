package auth

// Callers are authenticated by their bearer tokens.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

import (
	"context"

	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/kiln-ml/kiln/api/authn"
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
	u, err := authn.Review(ctx, t.Client, token, t.Audiences)
	if err != nil {
		return nil, err
	}
	id := &Identity{User: u.Username, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		id.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			id.Extra[k] = v
		}
	}
	return id, nil
}
