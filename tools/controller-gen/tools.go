//go:build tools

// Package tools records the commands this module builds, so `go mod tidy` keeps them.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
