package clientconfig

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// A token file is read for every request, so that a rotated projected token is used as
// soon as the kubelet writes it; KILN_TOKEN_FILE overrides the context's token.
func TestTokenFileIsReadForEveryRequest(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvTokenFile, file)
	t.Setenv(EnvServer, srv.URL)
	cfg := &Config{CurrentContext: "c", Contexts: []Context{{Name: "c", Server: "http://unused:1", Token: "from-context"}}}
	ctx, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Token != "" || ctx.TokenFile != file {
		t.Fatalf("resolved token %q, token file %q: want the file of %s", ctx.Token, ctx.TokenFile, EnvTokenFile)
	}
	hc := &http.Client{Transport: BearerTransport{Token: ctx.Token, TokenFile: ctx.TokenFile, Base: http.DefaultTransport}}
	for _, next := range []string{"second", ""} {
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if next != "" {
			if err := os.WriteFile(file, []byte(next), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != 2 || got[0] != "Bearer first" || got[1] != "Bearer second" {
		t.Errorf("Authorization headers %q, want the file's content at each request", got)
	}

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Get(srv.URL); err == nil {
		t.Error("a missing token file must fail the request")
	}
}
