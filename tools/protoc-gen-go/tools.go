//go:build tools

// Package tools records the commands this module builds, so `go mod tidy` keeps them.
package tools

import (
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
)
