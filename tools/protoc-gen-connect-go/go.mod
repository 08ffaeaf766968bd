// Pins protoc-gen-connect-go for the build; kept out of go.work so its dependencies never leak into ours.
module github.com/kiln-ml/kiln/tools/protoc-gen-connect-go

go 1.26.0

require connectrpc.com/connect v1.21.1

require google.golang.org/protobuf v1.36.11 // indirect
