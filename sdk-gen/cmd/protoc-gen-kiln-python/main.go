// Command protoc-gen-kiln-python is the protoc (buf) plugin that writes the Python SDK's
// typed messages, enums and service clients from Kiln's API definitions: one module per
// protobuf package (kiln.v1 → kiln_v1.py), standard library only. `make generate` runs it.
package main

import (
	"google.golang.org/protobuf/compiler/protogen"

	"github.com/kiln-ml/kiln/sdk-gen/internal/python"
)

func main() {
	protogen.Options{}.Run(python.Generate)
}
