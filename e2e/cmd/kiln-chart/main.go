// Command kiln-chart writes the generated templates of the Helm chart charts/kiln (see
// package chart). `make generate` runs it; `make verify` fails when its output differs
// from the commit.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kiln-ml/kiln/e2e/internal/chart"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

func main() {
	root := flag.String("root", "", "repository root (default: the nearest directory with go.work)")
	flag.Parse()
	dir, err := platform.RepoRoot(*root)
	if err == nil {
		err = chart.Generate(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kiln-chart:", err)
		os.Exit(1)
	}
}
