package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
)

// OIDCConfig describes an OIDC issuer whose ID tokens the server accepts directly, for
// clusters whose kube-apiserver is not configured with it. Users are named
// UsernamePrefix + the UsernameClaim, groups GroupsPrefix + each of GroupsClaim, and RBAC
// is written for those names.
type OIDCConfig struct {
	IssuerURL      string
	ClientID       string
	UsernameClaim  string
	UsernamePrefix string
	GroupsClaim    string
	GroupsPrefix   string
	// CAFile trusts a private issuer's certificate (empty: the system's CAs).
	CAFile string
}

// OIDC verifies ID tokens of one issuer.
type OIDC struct {
	cfg      OIDCConfig
	verifier *oidc.IDTokenVerifier
}

// NewOIDC discovers the issuer (its keys are fetched and refreshed as tokens need them).
// ctx carries the HTTP client to reach it with (oidc.ClientContext).
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	if cfg.ClientID == "" {
		return nil, errors.New("--oidc-client-id is required with --oidc-issuer-url")
	}
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = "sub"
	}
	provider, err := oidc.NewProvider(ctx, cfg.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("discovering OIDC issuer %s: %w", cfg.IssuerURL, err)
	}
	return &OIDC{cfg: cfg, verifier: provider.Verifier(&oidc.Config{ClientID: cfg.ClientID})}, nil
}

// Authenticate implements Authenticator. A token that is not a JWT of this issuer is
// rejected (so the next authenticator of a Chain may accept it).
func (o *OIDC) Authenticate(ctx context.Context, token string) (*Identity, error) {
	if strings.Count(token, ".") != 2 {
		return nil, fmt.Errorf("%w: not an OIDC ID token", ErrUnauthenticated)
	}
	idToken, err := o.verifier.Verify(ctx, token)
	if err != nil {
		return nil, fmt.Errorf("%w: OIDC: %w", ErrUnauthenticated, err)
	}
	claims := map[string]any{}
	if err := idToken.Claims(&claims); err != nil {
		return nil, fmt.Errorf("%w: OIDC claims: %w", ErrUnauthenticated, err)
	}
	name, _ := claims[o.cfg.UsernameClaim].(string)
	if name == "" {
		return nil, fmt.Errorf("%w: OIDC token has no %q claim", ErrUnauthenticated, o.cfg.UsernameClaim)
	}
	if o.cfg.UsernameClaim == "email" {
		// As kube-apiserver does: an unverified email address names nobody.
		if v, ok := claims["email_verified"].(bool); ok && !v {
			return nil, fmt.Errorf("%w: OIDC email %q is not verified", ErrUnauthenticated, name)
		}
	}
	id := &Identity{User: o.cfg.UsernamePrefix + name, Groups: []string{"system:authenticated"}}
	if o.cfg.GroupsClaim != "" {
		switch g := claims[o.cfg.GroupsClaim].(type) {
		case string:
			id.Groups = append(id.Groups, o.cfg.GroupsPrefix+g)
		case []any:
			for _, v := range g {
				if s, ok := v.(string); ok {
					id.Groups = append(id.Groups, o.cfg.GroupsPrefix+s)
				}
			}
		}
	}
	return id, nil
}
