// Command kiln-chart writes the generated templates of the Helm chart charts/kiln (see
// package chart). `make generate` runs it; `make verify` fails when its output differs
// from the commit.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kiln-ml/kiln/api/testing/pinned"
	"github.com/kiln-ml/kiln/build/internal/chart"
)

func main() {
	root := flag.String("root", "", "repository root (default: the nearest directory with go.work)")
	flag.Parse()
	dir, err := repoRoot(*root)
	if err == nil {
		err = chart.Generate(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kiln-chart:", err)
		os.Exit(1)
	}
}

func repoRoot(dir string) (string, error) {
	if dir != "" {
		return filepath.Abs(dir)
	}
	return pinned.RepoRoot()
}
