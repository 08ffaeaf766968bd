// Pins protoc-gen-go for the build; kept out of go.work so its dependencies never leak into ours.
module github.com/kiln-ml/kiln/tools/protoc-gen-go

go 1.26.0

require google.golang.org/protobuf v1.36.12
