package platform

import (
	"path/filepath"

	"github.com/kiln-ml/kiln/api/testing/pinned"
)

// RepoRoot is dir made absolute when given, else the nearest directory above the working
// directory that holds go.work: the repository the platform's binaries and state live in.
func RepoRoot(dir string) (string, error) {
	if dir != "" {
		return filepath.Abs(dir)
	}
	return pinned.RepoRoot()
}
