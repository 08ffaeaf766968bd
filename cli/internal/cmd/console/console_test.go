package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

// serve answers as the API server does: HTTP/1.1 and h2c, which the CLI speaks to http:// servers.
func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func runCmd(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	f, io := (&kilntest.Server{}).Factory(false)
	f.Server = url
	out, _, err := kilntest.Execute(NewCmdConsole(f, nil), io, args...)
	return out, err
}

func console(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'")
	switch r.URL.Path {
	case "/":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><script type="module" src="/assets/main-AB12.js"></script>`))
	case "/assets/main-AB12.js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = w.Write([]byte(strings.Repeat("x", 3000)))
	default:
		http.NotFound(w, r)
	}
}

func TestPrintsTheURL(t *testing.T) {
	out, err := runCmd(t, "https://kiln.example.com")
	if err != nil || !strings.Contains(out, "Kiln's web console: https://kiln.example.com/\n") {
		t.Fatalf("%q, %v", out, err)
	}
}

func TestCheckLoadsThePageAndItsScript(t *testing.T) {
	out, err := runCmd(t, serve(t, console), "--check")
	if err != nil || !strings.Contains(out, "answers at") || !strings.Contains(out, "3 KiB") {
		t.Fatalf("%q, %v", out, err)
	}
}

func TestCheckSaysWhatIsWrong(t *testing.T) {
	for name, c := range map[string]struct {
		h    http.HandlerFunc
		want string
	}{
		"not built": {func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("Kiln's web console is not built into this API server"))
		}, "built without its console"},
		"another server": {func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>hello</html>"))
		}, "without the console's Content-Security-Policy"},
		"missing script": {func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				console(w, r)
				return
			}
			http.NotFound(w, r)
		}, "404"},
	} {
		if _, err := runCmd(t, serve(t, c.h), "--check"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, c.want)
		}
	}
}
