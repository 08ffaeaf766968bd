module github.com/kiln-ml/kiln/cli

go 1.26.0

replace github.com/kiln-ml/kiln/api => ../api

require (
	connectrpc.com/connect v1.21.1
	github.com/google/go-cmp v0.7.0
	github.com/kiln-ml/kiln/api v0.0.0-00010101000000-000000000000
	github.com/spf13/cobra v1.10.2
	golang.org/x/term v0.47.0
	google.golang.org/protobuf v1.36.12
	k8s.io/utils v0.0.0-20260707023825-cf1189d6abe3
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
