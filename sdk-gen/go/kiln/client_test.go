package kiln

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestResolveContextOptionErrors(t *testing.T) {
	t.Setenv("KILN_SERVER", "")
	t.Setenv("KILN_CONTEXT", "")
	file := filepath.Join(t.TempDir(), "none.yaml")
	for name, tc := range map[string]struct {
		opts       Options
		wantOption string
		wantMsg    string
	}{
		"a context not in the file": {opts: Options{ConfigFile: file, Context: "prod"}, wantOption: "Context",
			wantMsg: `context "prod" is not in the Kiln configuration ` + file + ": list them with `kiln config get-contexts`"},
		"a server that is no URL": {opts: Options{ConfigFile: file, Server: "kiln.example.com"}, wantOption: "Server",
			wantMsg: `Server: server "kiln.example.com": want a URL such as https://kiln.example.com or http://127.0.0.1:18090`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ResolveContext(tc.opts)
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Option != tc.wantOption || err.Error() != tc.wantMsg {
				t.Errorf("ResolveContext() error %v, want an OptionError of %s saying %q", err, tc.wantOption, tc.wantMsg)
			}
		})
	}
	kc, err := ResolveContext(Options{ConfigFile: file, Server: "http://127.0.0.1:1", Namespace: "team-a"})
	if err != nil || kc.Server != "http://127.0.0.1:1" || kc.Namespace != "team-a" {
		t.Errorf("ResolveContext() = %+v, %v", kc, err)
	}
}
