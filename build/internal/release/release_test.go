package release

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPackageVersion(t *testing.T) {
	for in, want := range map[string]string{"v0.2.0": "0.2.0", "v1.10.3": "1.10.3", "v0.2.0-rc.1": "0.2.0-rc.1"} {
		if got, err := PackageVersion(in); err != nil || got != want {
			t.Errorf("PackageVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0.2.0", "v0.2", "v01.2.3", "v0.2.0+build", "latest", "aeb23f4"} {
		if _, err := PackageVersion(bad); err == nil || !strings.Contains(err.Error(), "want vMAJOR.MINOR.PATCH") {
			t.Errorf("PackageVersion(%q) = %v, want the expected form named", bad, err)
		}
	}
}

func TestStampChart(t *testing.T) {
	dir := t.TempDir()
	chart := "apiVersion: v2\nname: kiln\n# The chart's version\nversion: 0.1.0\nappVersion: \"0.1.0\"\ndependencies:\n  - name: jobset\n    version: 0.12.0\n"
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(chart), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := StampChart(dir, "0.2.0"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	want := strings.Replace(strings.Replace(chart, "version: 0.1.0\n", "version: 0.2.0\n", 1), `appVersion: "0.1.0"`, `appVersion: "0.2.0"`, 1)
	if string(got) != want {
		t.Errorf("stamped:\n%s\nwant (the dependency's version untouched):\n%s", got, want)
	}
	if err := Stamp(filepath.Join(dir, "Chart.yaml"), `(?m)^(kubeVersion: ).*$`, "x", 1); err == nil {
		t.Error("a stamp that matched nothing passed")
	}
}

func TestChecksums(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "cli"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f, data := range map[string]string{"b.tgz": "chart", "cli/kiln-linux-amd64": "binary"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text, err := Checksums(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("chart"))
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 2 || lines[0] != hex.EncodeToString(sum[:])+"  b.tgz" || !strings.HasSuffix(lines[1], "  cli/kiln-linux-amd64") {
		t.Fatalf("SHA256SUMS:\n%s", text)
	}
	// sha256sum checks it, as a user would.
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum --check: %v\n%s", err, out)
		}
	}
}

func TestChanges(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	commit := func(msg string) { git("commit", "-q", "--allow-empty", "-m", msg) }
	commit("first")
	previous, commits, err := Changes(dir, "v0.1.0")
	if err != nil || previous != "" || len(commits) != 1 {
		t.Fatalf("with no tag: %q %v %v, want every commit", previous, commits, err)
	}
	git("tag", "v0.1.0")
	commit("second")
	git("tag", "not-a-release")
	commit("third")
	git("tag", "v0.2.0") // the release being made may be tagged already
	previous, commits, err = Changes(dir, "v0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	if previous != "v0.1.0" || len(commits) != 2 || !strings.HasPrefix(commits[0], "third (") || !strings.HasPrefix(commits[1], "second (") {
		t.Errorf("since v0.1.0: %q %q", previous, commits)
	}
	notes := Notes("v0.2.0", previous, commits, map[string]string{"kiln-operator": "sha256:abc"}, []string{"kiln-linux-amd64"})
	for _, want := range []string{"# Kiln v0.2.0", "## Changes since v0.1.0 (2 commits)", "- third (", "--version 0.2.0", "| image `kiln-operator:v0.2.0` | `sha256:abc`", "cli/kiln-linux-amd64"} {
		if !strings.Contains(notes, want) {
			t.Errorf("the notes lack %q:\n%s", want, notes)
		}
	}
}
