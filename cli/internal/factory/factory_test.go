package factory

import (
	"path/filepath"
	"testing"

	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

// The SDK resolves the configuration; the CLI's errors still name its flags.
func TestResolveContextNamesTheFlags(t *testing.T) {
	t.Setenv("KILN_SERVER", "")
	t.Setenv("KILN_CONTEXT", "")
	t.Setenv("KILN_NAMESPACE", "")
	io, _, _, _ := iostreams.Test()
	path := filepath.Join(t.TempDir(), "none.yaml")
	for name, tc := range map[string]struct {
		context, server string
		wantErr         string
	}{
		"--context not in the file": {context: "prod", wantErr: `context "prod" is not in ` + path + ": list them with `kiln config get-contexts`"},
		"--server not a URL":        {server: "kiln.example.com", wantErr: `--server: server "kiln.example.com": want a URL such as https://kiln.example.com or http://127.0.0.1:18090`},
	} {
		t.Run(name, func(t *testing.T) {
			f := New(io)
			f.ConfigPath, f.Context, f.Server = path, tc.context, tc.server
			if _, err := f.ResolveContext(); err == nil || err.Error() != tc.wantErr {
				t.Errorf("ResolveContext() error %v, want %q", err, tc.wantErr)
			}
			if _, err := f.Client(); err == nil || err.Error() != tc.wantErr {
				t.Errorf("Client() error %v, want %q", err, tc.wantErr)
			}
		})
	}
	f := New(io)
	f.ConfigPath, f.Server = path, "http://127.0.0.1:1"
	kc, err := f.ResolveContext()
	if err != nil || kc.Server != "http://127.0.0.1:1" || kc.Namespace != "default" {
		t.Errorf("ResolveContext() = %+v, %v; want the server flag's, in namespace default", kc, err)
	}
	c, err := f.Client()
	if err != nil || c.ServerURL != "http://127.0.0.1:1" || c.Namespace != "default" {
		t.Errorf("Client() = %+v, %v", c, err)
	}
}
