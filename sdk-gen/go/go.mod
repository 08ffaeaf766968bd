module github.com/kiln-ml/kiln/sdk-gen/go

go 1.26.0

replace github.com/kiln-ml/kiln/api => ../../api

require (
	connectrpc.com/connect v1.21.1
	github.com/google/go-cmp v0.7.0
	github.com/kiln-ml/kiln/api v0.0.0-00010101000000-000000000000
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261026165753-2ffab32bce7e
	google.golang.org/protobuf v1.36.12
)

require (
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
