// Pins the ginkgo CLI, which runs the e2e suite's specs in parallel processes
// (`go test` cannot). Its version must be e2e/go.mod's github.com/onsi/ginkgo/v2.
module github.com/kiln-ml/kiln/tools/ginkgo

go 1.26.0

require github.com/onsi/ginkgo/v2 v2.34.0

require (
	github.com/Masterminds/semver/v3 v3.4.0 // indirect
	github.com/go-task/slim-sprig/v3 v3.0.0 // indirect
	github.com/google/pprof v0.0.0-20260402051712-545e8a4df936 // indirect
	golang.org/x/mod v0.35.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/tools v0.44.0 // indirect
)
