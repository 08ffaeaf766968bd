package platform

import (
	"errors"
	"os"
	"path/filepath"
)

// RepoRoot is dir made absolute when given, else the nearest directory above the working
// directory that holds go.work: the repository the platform's binaries and state live in.
func RepoRoot(dir string) (string, error) {
	if dir != "" {
		return filepath.Abs(dir)
	}
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
			return "", errors.New("no go.work above the current directory; run from the repository or pass --root")
		}
		dir = parent
	}
}
