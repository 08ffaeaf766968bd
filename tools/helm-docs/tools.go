//go:build tools

// Package tools records the commands this module builds, so `go mod tidy` keeps them.
package tools

import (
	_ "github.com/norwoodj/helm-docs/cmd/helm-docs"
)
