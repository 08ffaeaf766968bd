// Package console serves Kiln's web console: the single-page app built from console/ (make
// console) into dist/ and embedded in the API server's binary. It is served at / on the API
// server's own port, beside the Connect services it calls; the page holds nothing secret, and
// every call it makes carries the user's bearer token, checked like any other caller's.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// built is console/'s build output; only dist/.gitkeep when the console was not built.
//
//go:embed all:dist
var built embed.FS

// ContentSecurityPolicy lets the page load its own scripts, styles and images and call its
// own origin, and nothing else: no inline script, no third-party request, no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the embedded console.
func Handler() http.Handler {
	dist, err := fs.Sub(built, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return New(dist)
}

// New serves the console in fsys: index.html for / and every path of the app (its routes
// live after the #), the hashed assets beside it (cached for a year: a new build has new
// names), and, where no console was built, a page that says how to build one.
func New(fsys fs.FS) http.Handler {
	index, indexErr := fs.ReadFile(fsys, "index.html")
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the console serves GET and HEAD; the API is at /kiln.v1.*", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if name != "" && name != "index.html" && path.Ext(name) != "" {
			if _, err := fs.Stat(fsys, name); err != nil {
				http.NotFound(w, r)
				return
			}
			if strings.HasPrefix(name, "assets/") {
				h.Set("Cache-Control", "public, max-age=31536000, immutable")
			}
			files.ServeHTTP(w, r)
			return
		}
		h.Set("Cache-Control", "no-cache")
		if indexErr != nil {
			h.Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("Kiln's web console is not built into this API server: run `make console` (or `make up`) and build the server again.\n"))
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(index)
	})
}
