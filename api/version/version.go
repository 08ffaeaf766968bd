// Package version is Kiln's version: one variable for every binary (operator, API server,
// CLI), stamped by the Makefile with
// -ldflags "-X github.com/kiln-ml/kiln/api/version.Version=<version>".
package version

// Version is the version the binary was built as; "dev" when built without the Makefile.
var Version = "dev"
