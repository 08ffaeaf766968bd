package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

func TestConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	run := func(stdin string, args ...string) (string, error) {
		t.Helper()
		io, in, out, _ := iostreams.Test()
		in.WriteString(stdin)
		cmd := NewCmdConfig(&factory.Factory{IO: io, ConfigPath: path})
		cmd.SetArgs(args)
		cmd.SetOut(out)
		err := cmd.Execute()
		return out.String(), err
	}
	if _, err := run("", "set-context", "local", "--server", "https://127.0.0.1:18443", "--token", "t0k3n", "--namespace", "default"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("s3cret\n", "set-context", "prod", "--server", "https://kiln.example.com", "--token-file", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("", "set-context", "--current", "--namespace", "team"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "local" || cfg.Context("local").Namespace != "team" || cfg.Context("local").Token != "t0k3n" || cfg.Context("prod").Token != "s3cret" {
		t.Errorf("configuration %+v", cfg)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("the file holding tokens is %v, want 0600", info.Mode().Perm())
	}
	// A token file stays a file, read again for every call: a rotated token is picked up.
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run("", "set-context", "rotating", "--server", "https://kiln.example.com", "--token-file", tokenFile); err != nil {
		t.Fatal(err)
	}
	if cfg, err = clientconfig.Load(path); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Context("rotating"); got.TokenFile != tokenFile || got.Token != "" {
		t.Errorf("--token-file %s kept token %q, token-file %q; want the file, no copy", tokenFile, got.Token, got.TokenFile)
	}
	if _, err := run("", "set-context", "rotating", "--token", "t0k3n2"); err != nil {
		t.Fatal(err)
	}
	if cfg, _ = clientconfig.Load(path); cfg.Context("rotating").TokenFile != "" {
		t.Errorf("--token after --token-file kept the file %q", cfg.Context("rotating").TokenFile)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run("", "set-context", "rotating", "--token-file", empty); err == nil || !strings.Contains(err.Error(), "the file is empty") {
		t.Errorf("an empty token file: %v", err)
	}
	out, _ := run("", "view")
	if strings.Contains(out, "t0k3n") || !strings.Contains(out, "token: REDACTED") {
		t.Errorf("view shows tokens:\n%s", out)
	}
	if out, _ := run("", "use-context", "prod"); out != "Switched to context \"prod\".\n" {
		t.Errorf("use-context: %q", out)
	}
	if out, _ := run("", "current-context"); out != "prod\n" {
		t.Errorf("current-context: %q", out)
	}
	out, _ = run("", "get-contexts")
	if !strings.Contains(out, "\tlocal\thttps://127.0.0.1:18443\tteam") || !strings.Contains(out, "*\tprod\t") {
		t.Errorf("get-contexts:\n%s", out)
	}
	if _, err := run("", "use-context", "nope"); err == nil || !strings.Contains(err.Error(), `no context "nope"`) {
		t.Errorf("use-context of a missing context: %v", err)
	}
	if _, err := run("", "set-context", "bad", "--server", "kiln.example.com"); factory.ExitCode(err) != factory.ExitUsage {
		t.Errorf("a server that is not a URL: %v", err)
	}
	if _, err := run("", "delete-context", "prod"); err != nil {
		t.Fatal(err)
	}
	if out, err := run("", "current-context"); err == nil {
		t.Errorf("after deleting the current context: %q", out)
	}
}
