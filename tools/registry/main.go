// Command registry is distribution's registry (github.com/distribution/distribution/v3, the
// reference implementation of the OCI distribution spec, Docker's registry:3 image) with its
// filesystem storage driver only: the local platform's OCI registry, which `make release`
// pushes images and the chart to and the real node pulls from. Run: registry serve CONFIG.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
