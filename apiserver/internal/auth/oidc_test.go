package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
)

// issuer is a minimal OIDC provider: discovery, keys, and tokens it signs.
type issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/keys", "authorization_endpoint": is.srv.URL + "/auth",
			"token_endpoint": is.srv.URL + "/token", "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	is.srv = httptest.NewTLSServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) token(t *testing.T, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: is.key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]any{"iss": is.srv.URL, "aud": "kiln", "sub": "1234", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range claims {
		base[k] = v
	}
	payload, _ := json.Marshal(base)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestOIDC(t *testing.T) {
	is := newIssuer(t)
	ctx := oidc.ClientContext(context.Background(), is.srv.Client())
	a, err := NewOIDC(ctx, OIDCConfig{IssuerURL: is.srv.URL, ClientID: "kiln", UsernameClaim: "email", UsernamePrefix: "oidc:", GroupsClaim: "groups", GroupsPrefix: "oidc:"})
	if err != nil {
		t.Fatalf("NewOIDC() = %v", err)
	}
	id, err := a.Authenticate(ctx, is.token(t, map[string]any{"email": "alice@example.com", "email_verified": true, "groups": []string{"ml", "admins"}}))
	if err != nil {
		t.Fatalf("Authenticate(valid token) = %v", err)
	}
	want := &Identity{User: "oidc:alice@example.com", Groups: []string{"system:authenticated", "oidc:ml", "oidc:admins"}}
	if diff := cmp.Diff(want, id); diff != "" {
		t.Errorf("identity (-want +got):\n%s", diff)
	}
	for name, tok := range map[string]string{
		"another audience":   is.token(t, map[string]any{"aud": "other", "email": "a@example.com"}),
		"expired":            is.token(t, map[string]any{"exp": time.Now().Add(-time.Hour).Unix(), "email": "a@example.com"}),
		"unverified email":   is.token(t, map[string]any{"email": "a@example.com", "email_verified": false}),
		"no username claim":  is.token(t, nil),
		"another issuer":     is.token(t, map[string]any{"iss": "https://elsewhere.example.com", "email": "a@example.com"}),
		"not a JWT":          "a-kubernetes-token",
		"tampered signature": is.token(t, map[string]any{"email": "a@example.com"}) + "x",
	} {
		if _, err := a.Authenticate(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("Authenticate(%s) = %v, want ErrUnauthenticated", name, err)
		}
	}
	if _, err := NewOIDC(ctx, OIDCConfig{IssuerURL: is.srv.URL}); err == nil {
		t.Errorf("NewOIDC() without a client ID succeeded")
	}
}
