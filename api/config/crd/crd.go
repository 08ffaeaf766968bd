// Package crd embeds the trainer.kubeflow.org and kiln.dev CustomResourceDefinitions that controller-gen
// generates into this directory (`make generate`), for the programs that install them.
package crd

import "embed"

// Files are the CRDs, one per file.
//
//go:embed *.yaml
var Files embed.FS
