# Kiln: a Kubernetes training platform. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
export PATH := $(BIN):$(PATH)
# kubectl's discovery cache stays in the repository too.
export KUBECACHEDIR := $(BIN)/kube-cache

# Tools are built from pinned modules under tools/, one module per tool, outside go.work.
# scheduler-library is served by the proxy but unknown to the checksum database; its
# checksum is pinned in tools/platform/go.sum.
TOOLS_ENV := GOWORK=off GOFLAGS=-mod=readonly GONOSUMDB=sigs.k8s.io/scheduler-library GOBIN=
GO_BUILD := go build -trimpath -ldflags '-s -w'

# The platform's Kubernetes side (the kube binaries, KWOK, JobSet, Kueue) is one module,
# tools/platform: the packages they share compile once, at one version, all static.
PLATFORM_MODULE := tools/platform/go.mod tools/platform/go.sum
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" && $$2 ~ /^v/ {print $$2; exit}' tools/platform/go.mod)
KUBE_MAJOR := $(word 1,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
KUBE_MINOR := $(word 2,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
# kwokctl reads `--version` to choose flags, so the servers must report their real version.
KUBE_VERSION_LDFLAGS := $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(pkg).gitVersion=$(KUBE_VERSION) -X $(pkg).gitMajor=$(KUBE_MAJOR) -X $(pkg).gitMinor=$(KUBE_MINOR) \
	-X $(pkg).gitTreeState=clean -X $(pkg).buildDate=1970-01-01T00:00:00Z)

# Kiln's own version, stamped into every binary through one variable (api/version).
KILN_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
VERSION_LDFLAGS := -X github.com/kiln-ml/kiln/api/version.Version=$(KILN_VERSION)
# Every build of Kiln's programs. grpcnotrace: gRPC, which OpenTelemetry's OTLP exporters link,
# then leaves out golang.org/x/net/trace, whose html/template (a method called by name) keeps
# the linker from dropping any exported method (docs/performance.md, "Where the memory goes").
# `make verify` fails if a server links text/template again (binary-deps).
KILN_BUILD_FLAGS := -tags=grpcnotrace

KUBE_BINARIES := kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy
PLATFORM_BINARIES := $(addprefix $(BIN)/,kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl jobset kueue registry)
CODEGEN_BINARIES := $(addprefix $(BIN)/,controller-gen helm buf protoc-gen-go protoc-gen-connect-go golangci-lint)
# The real node's binaries (see "A real node" in docs).
NODE_BINARIES := $(addprefix $(BIN)/,kubelet kube-proxy containerd containerd-shim-runc-v2 ctr runc coredns local-path-provisioner) \
	$(addprefix $(BIN)/cni/,bridge host-local loopback portmap)
# The real node (KILN_REAL_NODES, 1 by default) needs its binaries and images.
KILN_REAL_NODES ?= 1
# How `make test-e2e` runs Kiln: processes (fast), or chart (the Helm chart's pods on the real node).
KILN_INSTALL ?= processes
NODE_IMAGES := $(BIN)/images/pause.tar $(BIN)/images/torch-cpu.tar
# The chart's dependencies (JobSet's and Kueue's charts) and, for its local install, their images.
CHART_DEPS := charts/kiln/charts/jobset/Chart.yaml charts/kiln/charts/kueue/Chart.yaml
ADDON_IMAGES := $(BIN)/images/jobset.tar $(BIN)/images/kueue.tar
NODE_DEPS := $(NODE_BINARIES) $(NODE_IMAGES) node-host-packages
REAL_NODE_DEPS := $(if $(filter 0,$(KILN_REAL_NODES)),,$(NODE_DEPS))
# Upstream Kubeflow Trainer, the baseline `make bench` measures Kiln against.
BENCH_BINARIES := $(BIN)/trainer-controller-manager

# module_dir prints where the module $(2) pinned by tools/$(1) is, downloading it first: on
# a fresh machine nothing may have built from it yet, and `go list -m` does not download.
module_dir = cd tools/$(1) && $(TOOLS_ENV) go mod download $(2) && $(TOOLS_ENV) go list -m -f '{{.Dir}}' $(2)

# Manifests rendered from the pinned JobSet and Kueue modules (never committed).
ADDON_MANIFESTS := $(BIN)/manifests/jobset.yaml $(BIN)/manifests/kueue.yaml $(BIN)/manifests/kwok-stages.yaml \
	$(BIN)/manifests/podgroups-coscheduling.yaml $(BIN)/manifests/podgroups-volcano.yaml
# KWOK's own node and pod-ready stages; the harness adds Kiln's pod lifecycle stages.
KWOK_STAGES := node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml pod/fast/pod-ready.yaml

PLATFORM := $(BIN)/kiln-platform
OPERATOR := $(BIN)/kiln-operator
APISERVER := $(BIN)/kiln-apiserver
KILN := $(BIN)/kiln
KILN_BINARIES := $(PLATFORM) $(OPERATOR) $(APISERVER) $(KILN)
# What every local platform needs: the pinned binaries and the manifests rendered from them.
PLATFORM_DEPS := $(PLATFORM_BINARIES) $(ADDON_MANIFESTS)
# Go sources a binary depends on (module sources are few; find is cheap).
go_sources = $(shell find $(1) -name '*.go' -not -name '*_test.go') $(wildcard $(addsuffix /go.mod,$(1)) $(addsuffix /go.sum,$(1)))
GO_MODULES := api runtimes operator apiserver cli build e2e sdk-gen sdk-gen/go
# The SDKs (sdk-gen): the TypeScript package's tools and dependencies come from npm, pinned
# by its lockfile; Python needs nothing but python3.
SDK_TS := sdk-gen/typescript
SDK_TS_DEPS := $(SDK_TS)/node_modules/.package-lock.json
SDK_TS_DIST := $(SDK_TS)/dist/src/index.js
# The web console (console/): built by esbuild into the API server's embedded files.
CONSOLE := console
CONSOLE_DEPS := $(CONSOLE)/node_modules/.package-lock.json
CONSOLE_DIST := apiserver/internal/console/dist/index.html
KUBEBUILDER_ASSETS := $(BIN)
export KUBEBUILDER_ASSETS

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage:\n  make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z_0-9 -]+:.*?##/ { printf "  \033[36m%-28s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Quickstart

.PHONY: up
up: $(PLATFORM_DEPS) $(KILN_BINARIES) $(REAL_NODE_DEPS) ## Build what the platform needs, start it on 127.0.0.1 with Kiln installed, print what to try next.
	$(PLATFORM) up

.PHONY: down
down: $(PLATFORM) ## Stop every process `make up` (or chart-up, multicluster-up) started.
	$(PLATFORM) down

##@ Local platform

.PHONY: chart-up
chart-up: ## Start the local platform with Kiln installed by its Helm chart (charts/kiln): operator, API server, JobSet and Kueue as pods on the real node.
chart-up: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(PLATFORM) $(KILN) $(BIN)/helm $(CHART_DEPS) $(ADDON_IMAGES) $(NODE_DEPS)
	$(MAKE) images IMAGE_PLATFORMS=linux/$(HOST_ARCH)
	KILN_INSTALL=chart KILN_REAL_NODES=1 $(PLATFORM) up

.PHONY: platform-status
platform-status: $(PLATFORM) ## Show which platform components run and where.
	$(PLATFORM) status

##@ Build

.PHONY: cli
cli: $(KILN) ## Build the kiln CLI into bin/kiln (and bin/kubectl-kiln, the kubectl plugin).

$(PLATFORM): $(call go_sources,e2e build/images api runtimes) $(wildcard runtimes/catalog/*.yaml e2e/internal/platform/*.yaml) go.work
	go build -o $@ ./e2e/cmd/kiln-platform

$(OPERATOR): $(call go_sources,operator api runtimes) go.work
	go build $(KILN_BUILD_FLAGS) -ldflags "$(VERSION_LDFLAGS)" -o $@ ./operator/cmd/kiln-operator

$(APISERVER): $(call go_sources,apiserver api) go.work $(CONSOLE_DIST)
	go build $(KILN_BUILD_FLAGS) -ldflags "$(VERSION_LDFLAGS)" -o $@ ./apiserver/cmd/kiln-apiserver

# The CLI, also installed as the kubectl plugin `kubectl kiln`.
$(KILN): $(call go_sources,cli sdk-gen/go api) go.work
	go build $(KILN_BUILD_FLAGS) -ldflags "$(VERSION_LDFLAGS)" -o $@ ./cli/cmd/kiln
	ln -sf kiln $(BIN)/kubectl-kiln

include build/make/images.mk
include build/make/bench.mk
include build/make/tools.mk

##@ Development

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $(GO_MODULES) tools

.PHONY: vet
vet: ## Run go vet over every module.
	go vet $(addprefix ./,$(addsuffix /...,$(GO_MODULES)))

# GOLANGCI_LINT_CACHE stays in bin/ with the other caches.
.PHONY: lint
lint: $(BIN)/golangci-lint ## Lint every module (golangci-lint, config in .golangci.yml).
	GOLANGCI_LINT_CACHE=$(BIN)/golangci-lint-cache golangci-lint run $(addprefix ./,$(addsuffix /...,$(GO_MODULES)))

.PHONY: generate
generate: $(BIN)/controller-gen $(BIN)/helm-docs generate-proto generate-sdk ## Regenerate every generated artifact.
	cd api && controller-gen object paths="./trainer/...;./kiln/..." \
		crd:generateEmbeddedObjectMeta=true paths="./trainer/...;./kiln/..." output:crd:dir=./config/crd
	cd operator && controller-gen webhook rbac:roleName=kiln-operator paths=./... \
		output:webhook:artifacts:config=./config/webhook output:rbac:artifacts:config=./config/rbac
	cd apiserver && controller-gen rbac:roleName=kiln-apiserver paths=./... output:rbac:artifacts:config=./config/rbac
	go run ./cli/cmd/kiln-docs docs/cli.md
	go run ./build/cmd/kiln-chart
	@# The chart's README: its values table from the `# --` comments of values.yaml.
	helm-docs --chart-search-root charts --chart-to-generate charts/kiln --sort-values-order file --skip-version-footer --log-level warning
	@# buf's tests import a module version the proxy refuses; `-e` tidies buf regardless (its commands build).
	cd tools && for d in */; do \
		if [ "$$d" = buf/ ]; then flags="-e"; else flags=""; fi; \
		(cd "$$d" && $(TOOLS_ENV) GOFLAGS=-mod=mod go mod tidy $$flags 2>/dev/null) || { echo "go mod tidy failed in tools/$$d"; exit 1; }; \
	done
	@# go work sync aligns the modules' versions, after which a module may need go.sum lines
	@# that its first tidy had no use for: tidy again.
	for m in $(GO_MODULES); do (cd "$$m" && go mod tidy); done
	go work sync
	for m in $(GO_MODULES); do (cd "$$m" && go mod tidy); done

# The SDKs' generated layers: Python from protoc-gen-kiln-python (sdk-gen), TypeScript from
# protoc-gen-es (npm, pinned by the lockfile).
.PHONY: generate-sdk
generate-sdk: $(BIN)/buf $(BIN)/protoc-gen-kiln-python $(SDK_TS_DEPS) ## Regenerate the Python and TypeScript SDKs' messages and clients from api/proto.
	cd sdk-gen && buf generate ../api --template buf.gen.yaml

$(BIN)/protoc-gen-kiln-python: $(call go_sources,sdk-gen/cmd sdk-gen/internal) sdk-gen/go.mod go.work
	go build -o $@ ./sdk-gen/cmd/protoc-gen-kiln-python

# Node 20 or newer (the machine's; Debian's own nodejs is older), and the lockfile's packages.
$(SDK_TS_DEPS): $(SDK_TS)/package.json $(SDK_TS)/package-lock.json
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null || \
		{ echo "the TypeScript SDK needs Node.js 20 or newer (node --version: $$(node --version 2>&1))"; exit 1; }
	cd $(SDK_TS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(SDK_TS_DIST): $(SDK_TS_DEPS) $(SDK_TS)/tsconfig.json $(shell find $(SDK_TS)/src $(SDK_TS)/test -name '*.ts' 2>/dev/null)
	cd $(SDK_TS) && rm -rf dist && node_modules/.bin/tsc -p tsconfig.json

# The console's packages (npm, pinned by its lockfile) and its build: the SDK's sources and
# their packages go into the same bundle.
$(CONSOLE_DEPS): $(CONSOLE)/package.json $(CONSOLE)/package-lock.json
	cd $(CONSOLE) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(CONSOLE_DIST): $(CONSOLE_DEPS) $(SDK_TS_DEPS) $(CONSOLE)/build.mjs $(shell find $(CONSOLE)/src $(SDK_TS)/src -type f 2>/dev/null)
	cd $(CONSOLE) && node build.mjs

.PHONY: console
console: $(CONSOLE_DIST) ## Build the web console into the API server (apiserver/internal/console/dist, embedded by go:embed); fails over its size budget.

.PHONY: console-dev
console-dev: $(CONSOLE_DEPS) $(SDK_TS_DEPS) ## The console at http://127.0.0.1:8000, rebuilt and reloaded on every change, calling the local platform's API server (make up first).
	cd $(CONSOLE) && node build.mjs --dev

.PHONY: console-screenshots
console-screenshots: $(CONSOLE_DIST) chromium ## Refresh docs/console/*.png from the console's browser test, against the running local platform (make up first).
	KILN_CONSOLE_SCREENSHOTS=docs KILN_ROOT=$(ROOT) KUBECONFIG="$$($(PLATFORM) kubeconfig)" KILN_CONFIG=$(BIN)/platform/kiln/config.yaml \
		go test -count=1 ./e2e/test/e2e -ginkgo.focus "web console"

.PHONY: sdk
sdk: $(SDK_TS_DIST) ## Build the TypeScript SDK (sdk-gen/typescript/dist); the Python and Go SDKs need no build.

.PHONY: generate-proto
generate-proto: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-connect-go ## Lint the API definitions (buf STANDARD) and regenerate their Go code.
	cd api && buf lint && rm -rf gen && buf generate

# The API must not break clients built against main: buf's FILE rules against main's
# definitions (skipped where main has none yet).
.PHONY: proto-breaking
proto-breaking: $(BIN)/buf ## Fail when the API definitions break compatibility with main's.
	@if git cat-file -e main:api/proto 2>/dev/null; then \
		cd api && buf breaking proto --against "$(ROOT)/.git#branch=main,subdir=api/proto"; \
	else echo "proto-breaking: main has no API definitions yet; nothing to compare"; fi

# e2e/kind's scripts (run.sh on a host with Docker and a GPU; local.sh here): shellcheck, from Debian.
.PHONY: kind-lint
kind-lint: ## Check e2e/kind's scripts with shellcheck.
	$(call apt_install,command -v shellcheck,shellcheck)
	shellcheck e2e/kind/*.sh

# The servers must not link text/template: a method it calls by name makes the linker keep every
# exported method of every type (KILN_BUILD_FLAGS says what that cost).
.PHONY: binary-deps
binary-deps: ## Check that the operator and the API server do not link text/template.
	@for c in operator/cmd/kiln-operator apiserver/cmd/kiln-apiserver; do \
		by=$$(go list $(KILN_BUILD_FLAGS) -deps -f '{{.ImportPath}} {{join .Imports " "}}' ./$$c | \
			awk '{for (i = 2; i <= NF; i++) if ($$i == "text/template" || $$i == "html/template") print $$1}'); \
		[ -z "$$by" ] || { echo "make verify: ./$$c links text/template (imported by: $$(echo $$by)), which keeps every" \
			"exported method in the binary; drop that import or build it out with a tag in KILN_BUILD_FLAGS"; exit 1; }; \
	done

$(BIN)/kind: tools/kind/go.mod tools/kind/go.sum
	cd tools/kind && CGO_ENABLED=0 $(TOOLS_ENV) $(GO_BUILD) -o $@ sigs.k8s.io/kind

# The chart: helm lint --strict, and a render with the default values (the schema checked).
.PHONY: chart-lint
chart-lint: $(BIN)/helm $(CHART_DEPS) ## Lint the Helm chart charts/kiln (strict) and render it.
	helm lint --strict charts/kiln
	helm template kiln charts/kiln --namespace kiln-system --kube-version $(KUBE_VERSION) > /dev/null

# Every relative link of the Markdown files, to a file or a #heading, must resolve.
.PHONY: linkcheck
linkcheck: ## Fail on a Markdown link to a file or heading that does not exist.
	go run ./build/cmd/kiln-linkcheck

.PHONY: verify
verify: generate vet lint chart-lint kind-lint proto-breaking binary-deps linkcheck ## Regenerate and lint everything; fail on any finding, diff or untracked file.
	@test -z "$$(gofmt -l $(GO_MODULES) tools)" || { echo "gofmt needed:"; gofmt -l $(GO_MODULES) tools; exit 1; }
	@if [ -n "$$(git status --porcelain)" ]; then \
		echo "make verify: generated files differ from the commit; run 'make generate' and commit:"; \
		git status --porcelain; git --no-pager diff --stat; exit 1; fi

include build/make/test.mk
