package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func serve(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestServesTheAppWithItsPolicy(t *testing.T) {
	h := New(fstest.MapFS{
		"index.html":         {Data: []byte(`<!doctype html><script type="module" src="/assets/app-ABC.js"></script>`)},
		"assets/app-ABC.js":  {Data: []byte(`console.log(1)`)},
		"assets/app-ABC.css": {Data: []byte(`body{}`)},
		"favicon.svg":        {Data: []byte(`<svg/>`)},
	})
	for _, target := range []string{"/", "/index.html", "/jobs", "/some/deep/route"} {
		rec := serve(t, h, http.MethodGet, target)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "app-ABC.js") {
			t.Fatalf("GET %s: %d %q, want the app's index.html", target, rec.Code, rec.Body.String())
		}
		if got := rec.Header().Get("Content-Security-Policy"); got != ContentSecurityPolicy || strings.Contains(got, "unsafe-inline") {
			t.Fatalf("GET %s: CSP %q", target, got)
		}
		if rec.Header().Get("Cache-Control") != "no-cache" {
			t.Fatalf("GET %s: the index must be revalidated, Cache-Control %q", target, rec.Header().Get("Cache-Control"))
		}
	}
	rec := serve(t, h, http.MethodGet, "/assets/app-ABC.js")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Content-Type"), "javascript") || !strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
		t.Fatalf("asset: %d, %v", rec.Code, rec.Header())
	}
	if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("X-Frame-Options") != "DENY" {
		t.Fatalf("asset headers: %v", rec.Header())
	}
	if rec := serve(t, h, http.MethodGet, "/assets/app-OLD.js"); rec.Code != http.StatusNotFound {
		t.Fatalf("a missing asset: %d, want 404 (not the index: a stale page must fail loudly)", rec.Code)
	}
	if rec := serve(t, h, http.MethodPost, "/"); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /: %d, want 405", rec.Code)
	}
	if rec := serve(t, h, http.MethodGet, "/../../etc/passwd"); rec.Code == http.StatusOK && !strings.Contains(rec.Body.String(), "app-ABC.js") {
		t.Fatalf("a path out of the tree served %q", rec.Body.String())
	}
}

func TestSaysHowToBuildAMissingConsole(t *testing.T) {
	rec := serve(t, New(fstest.MapFS{".gitkeep": {}}), http.MethodGet, "/")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "make console") {
		t.Fatalf("%d %q, want 503 naming make console", rec.Code, rec.Body.String())
	}
}
