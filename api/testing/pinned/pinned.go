// Package pinned locates the upstream modules that Kiln pins under tools/ (one module per
// component), so that tests read CRDs, manifests and examples at exactly the version the
// platform runs. It imports nothing of Kiln's, so any test can use it.
package pinned

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/mod/modfile"
)

// RepoRoot is the root of the Kiln repository (the directory holding go.work), found by
// walking up from the working directory, which `go test` sets to the package's.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory: run inside the Kiln repository (or name it, where a command takes --root)")
		}
		dir = parent
	}
}

var moduleDirs sync.Map // "tool module" -> dir

// ModuleDir is the source directory of module at the version that tools/<tool>/go.mod pins,
// downloaded into the module cache if it is not there yet. Every test that reads a pinned
// component's files (CRDs, manifests, examples) resolves them here, so that each version is
// pinned in exactly one place: the tool module the platform builds the component from.
func ModuleDir(tool, module string) (string, error) {
	key := tool + " " + module
	if dir, ok := moduleDirs.Load(key); ok {
		return dir.(string), nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	goCmd := func(args ...string) (string, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = filepath.Join(root, "tools", tool)
		// The tool modules live outside go.work. scheduler-library (a Kueue dependency) is
		// unknown to the checksum database; its checksum is pinned in tools/platform/go.sum.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "GONOSUMDB=sigs.k8s.io/scheduler-library")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("go %s in tools/%s: %w: %s", strings.Join(args, " "), tool, err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	// `go list -m` does not download; on a fresh machine nothing may have built from it yet.
	if _, err := goCmd("mod", "download", module); err != nil {
		return "", err
	}
	dir, err := goCmd("list", "-m", "-f", "{{.Dir}}", module)
	if err != nil {
		return "", err
	}
	if dir == "" {
		return "", fmt.Errorf("tools/%s does not require %s", tool, module)
	}
	moduleDirs.Store(key, dir)
	return dir, nil
}

// ModuleVersion is the version of module that tools/<tool>/go.mod pins.
func ModuleVersion(tool, module string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return Requirement(filepath.Join(root, "tools", tool, "go.mod"), module)
}

// Requirement is the version of module that the go.mod at path requires.
func Requirement(path, module string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	f, err := modfile.ParseLax(path, data, nil)
	if err != nil {
		return "", err
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version, nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", path, module)
}
