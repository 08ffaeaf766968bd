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
# the linker from dropping any exported method: the operator's code and tables take 41 MB
# instead of 60, and it keeps fewer of their pages resident (docs/performance.md, "Where the
# memory goes"). `make verify` fails if a server links text/template again (binary-deps).
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
REAL_NODE_DEPS := $(if $(filter 0,$(KILN_REAL_NODES)),,$(NODE_BINARIES) $(NODE_IMAGES) node-host-packages)
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
up: platform-up ## Build what the platform needs, start it, install Kiln, print what to try next (codegen and bench tools: make tools).

.PHONY: down
down: platform-down ## Stop every process `make up` started.

##@ Local platform

.PHONY: platform-up cluster-up
platform-up cluster-up: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(PLATFORM) $(OPERATOR) $(APISERVER) $(KILN) $(REAL_NODE_DEPS) ## Start the control plane, KWOK nodes, JobSet, Kueue and Kiln (CRDs, operator, runtime catalog, API server) on 127.0.0.1.
	$(PLATFORM) up

.PHONY: chart-up
chart-up: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(PLATFORM) $(KILN) $(BIN)/helm $(CHART_DEPS) $(ADDON_IMAGES) $(NODE_BINARIES) $(NODE_IMAGES) node-host-packages ## Start the local platform with Kiln installed by its Helm chart (charts/kiln): operator, API server, JobSet and Kueue as pods on the real node.
	$(MAKE) images IMAGE_PLATFORMS=linux/$(HOST_ARCH)
	KILN_INSTALL=chart KILN_REAL_NODES=1 $(PLATFORM) up

.PHONY: platform-down cluster-down
platform-down cluster-down: $(PLATFORM) ## Stop the local platform and every process it started.
	$(PLATFORM) down

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

##@ Images

# Built without a Docker engine (go-containerregistry, build/images): static binaries
# per platform, on a minimal base (nonroot 65532, Debian's CA certificates), as OCI archives.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGES_BUILD := $(BIN)/images/build
comma := ,

.PHONY: images
images: $(CONSOLE_DIST) ## Build Kiln's images (base, pause, kiln-operator, kiln-apiserver, kiln) as OCI archives in bin/images; reproducible.
	dpkg -s ca-certificates >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq ca-certificates; }
	for p in $(subst $(comma), ,$(IMAGE_PLATFORMS)); do \
		os=$${p%%/*}; arch=$${p#*/}; dir=$(IMAGES_BUILD)/$${os}_$${arch}; mkdir -p $$dir; \
		build="env CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build $(KILN_BUILD_FLAGS) -trimpath"; \
		$$build -ldflags "-s -w $(VERSION_LDFLAGS)" -o $$dir/kiln-operator ./operator/cmd/kiln-operator; \
		$$build -ldflags "-s -w $(VERSION_LDFLAGS)" -o $$dir/kiln-apiserver ./apiserver/cmd/kiln-apiserver; \
		$$build -ldflags "-s -w $(VERSION_LDFLAGS)" -o $$dir/kiln ./cli/cmd/kiln; \
		$$build -ldflags "-s -w" -o $$dir/kiln-pause ./build/cmd/kiln-pause; \
	done
	go run ./build/cmd/kiln-images --out $(BIN)/images --binaries $(IMAGES_BUILD) --platforms $(IMAGE_PLATFORMS) \
		--version $(KILN_VERSION) --revision "$$(git rev-parse HEAD)" --created "$$(git log -1 --format=%cI)"

# The real node's sandbox image, for this machine's platform only (make images builds both).
$(BIN)/images/pause.tar: $(call go_sources,build/cmd/kiln-pause build/cmd/kiln-images build/images)
	@mkdir -p $(IMAGES_BUILD)/linux_$(HOST_ARCH)
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(IMAGES_BUILD)/linux_$(HOST_ARCH)/kiln-pause ./build/cmd/kiln-pause
	go run ./build/cmd/kiln-images --out $(BIN)/images --binaries $(IMAGES_BUILD) --platforms linux/$(HOST_ARCH) \
		--version $(KILN_VERSION) --revision "$$(git rev-parse HEAD)" --created "$$(git log -1 --format=%cI)" pause

# JobSet's and Kueue's images for the chart's local install (nothing can be pulled here): the
# pinned static binaries as /manager, upstream's entrypoint, on Kiln's base; this machine's
# platform only, tagged with the pinned version (kiln.local/jobset:v0.12.0).
$(ADDON_IMAGES): $(BIN)/images/%.tar: $(BIN)/% $(call go_sources,build/cmd/kiln-images build/images)
	@mkdir -p $(IMAGES_BUILD)/linux_$(HOST_ARCH)
	ln -sf $(BIN)/$* $(IMAGES_BUILD)/linux_$(HOST_ARCH)/$*
	version="$$(cd tools/platform && $(TOOLS_ENV) go list -m -f '{{.Version}}' sigs.k8s.io/$*)"; \
		go run ./build/cmd/kiln-images --out $(BIN)/images --binaries $(IMAGES_BUILD) --platforms linux/$(HOST_ARCH) \
		--version "$$version" --revision "$$version" --source https://github.com/kubernetes-sigs/$* $*

.PHONY: addon-images
addon-images: $(ADDON_IMAGES) ## Build JobSet's and Kueue's images from the pinned binaries, for the chart's local install.

# kiln.local/torch-cpu: a Debian root filesystem (debootstrap, DEBIAN_SUITE from
# DEBIAN_MIRROR) with the packages in e2e/images/torch-cpu/packages, finished by its
# customize.sh, as one layer. The root filesystem is kept in bin/ and rebuilt only when
# those two files change.
DEBIAN_SUITE ?= bookworm
DEBIAN_MIRROR ?= http://deb.debian.org/debian
TORCH_ROOTFS := $(BIN)/images/torch-cpu.rootfs
HOST_ARCH := $(shell go env GOARCH)

$(TORCH_ROOTFS)/.done: e2e/images/torch-cpu/packages e2e/images/torch-cpu/customize.sh
	command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
	rm -rf $(TORCH_ROOTFS) && mkdir -p $(TORCH_ROOTFS)
	debootstrap --variant=minbase --include="$$(grep -v '^#' $< | paste -sd, -)" \
		$(DEBIAN_SUITE) $(TORCH_ROOTFS) $(DEBIAN_MIRROR) > $(BIN)/images/torch-cpu.debootstrap.log 2>&1 \
		|| { tail -20 $(BIN)/images/torch-cpu.debootstrap.log; exit 1; }
	e2e/images/torch-cpu/customize.sh $(TORCH_ROOTFS)
	touch $@

# The image has Kiln's Python SDK, whose kiln.checkpoint is the training-side helper of
# docs/fault-tolerance.md, installed as pip would put it (site-packages of /usr/local).
SDK_PY_SOURCES := $(shell find sdk-gen/python/kiln -name '*.py' -o -name py.typed)
$(BIN)/images/torch-cpu.tar: $(TORCH_ROOTFS)/.done $(SDK_PY_SOURCES) $(call go_sources,build/cmd/kiln-images build/images)
	py="$$(basename "$$(ls -d $(TORCH_ROOTFS)/usr/lib/python3.[0-9]* | head -1)")"; \
		site=$(TORCH_ROOTFS)/usr/local/lib/$$py/dist-packages; \
		rm -rf "$$site/kiln" && mkdir -p "$$site" && cp -r sdk-gen/python/kiln "$$site/kiln" && \
		find "$$site/kiln" -name __pycache__ -prune -exec rm -rf {} +
	version="$$(dpkg-query --admindir=$(TORCH_ROOTFS)/var/lib/dpkg -W -f '$${Version}' python3-torch | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')"; \
		go run ./build/cmd/kiln-images --out $(BIN)/images --rootfs $(TORCH_ROOTFS) --version "$$version" \
		--cmd python3 torch-cpu

.PHONY: node-images
node-images: $(NODE_IMAGES) ## Build the real node's images: the sandbox (pause) and kiln.local/torch-cpu (Debian's PyTorch, CPU).

.PHONY: push
push: ## Push the images in bin/images to REGISTRY (host[:port][/path]) as <image>:<version>; docker login credentials if asked.
	@test -n "$(REGISTRY)" || { echo "make push: set REGISTRY, e.g. make push REGISTRY=ghcr.io/my-org"; exit 2; }
	go run ./build/cmd/kiln-images --out $(BIN)/images --version $(KILN_VERSION) --push $(REGISTRY)

##@ Release

# A release: one version, vX.Y.Z, on everything (see docs/install.md, "Releases").
RELEASE_DIR = $(BIN)/release/$(VERSION)
CLI_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# The registry release-push pushes to: the local platform's by default (make up runs it).
REGISTRY ?= 127.0.0.1:18500
REGISTRY_CA ?= $(if $(filter 127.0.0.1:18500,$(REGISTRY)),$(BIN)/platform/pki/ca.crt)

.PHONY: release
release: $(BIN)/helm $(CHART_DEPS) $(SDK_TS_DIST) ## Build release VERSION (vX.Y.Z) in bin/release/VERSION: images tagged VERSION, the chart and SDK packages versioned X.Y.Z, CLI binaries, notes, SHA256SUMS.
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || { echo "make release: set VERSION=vMAJOR.MINOR.PATCH, e.g. make release VERSION=v0.2.0"; exit 2; }
	$(MAKE) images KILN_VERSION=$(VERSION)
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)/cli
	for p in $(CLI_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build $(KILN_BUILD_FLAGS) -trimpath -ldflags "-s -w -X github.com/kiln-ml/kiln/api/version.Version=$(VERSION)" \
			-o $(RELEASE_DIR)/cli/kiln-$${p%/*}-$${p#*/} ./cli/cmd/kiln; \
	done
	@# The conformance suite (docs/install.md, "Check an install"), for the machines admins run it from.
	for a in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$a go test $(KILN_BUILD_FLAGS) -c -trimpath -ldflags "-s -w -X github.com/kiln-ml/kiln/api/version.Version=$(VERSION)" \
			-o $(RELEASE_DIR)/cli/kiln-conformance-linux-$$a ./e2e/test/e2e; \
	done
	go run ./build/cmd/kiln-release --version $(VERSION) --out $(RELEASE_DIR) --images $(BIN)/images --helm $(BIN)/helm

.PHONY: release-push
release-push: $(BIN)/helm ## Push release VERSION's images (REGISTRY/kiln/<name>:VERSION) and chart (oci://REGISTRY/charts/kiln) to REGISTRY, the local platform's by default.
	@test -f $(RELEASE_DIR)/SHA256SUMS || { echo "make release-push: no release $(VERSION) in $(RELEASE_DIR) (make release VERSION=$(VERSION))"; exit 2; }
	go run ./build/cmd/kiln-images --out $(RELEASE_DIR)/images --version $(VERSION) --push $(REGISTRY)/kiln \
		$(if $(REGISTRY_CA),--push-ca-file $(REGISTRY_CA))
	helm push $(RELEASE_DIR)/kiln-$(VERSION:v%=%).tgz oci://$(REGISTRY)/charts $(if $(REGISTRY_CA),--ca-file $(REGISTRY_CA))

##@ Chart

# JobSet's and Kueue's own Helm charts, the umbrella chart's dependencies, copied from the
# pinned Go modules (never committed: other projects' source). One change: Kueue's chart has
# its CRDs among its templates, so `helm uninstall` would delete them, every queue and
# Workload with them, and hang on their finalizers once Kueue's controller is gone. Kiln
# keeps CRDs by policy, so the copy marks each with helm.sh/resource-policy: keep.
charts/kiln/charts/%/Chart.yaml: $(PLATFORM_MODULE)
	dir="$$($(call module_dir,platform,sigs.k8s.io/$*))"; rm -rf $(@D) && mkdir -p $(dir $(@D)) && cp -R "$$dir/charts/$*" $(@D)
	chmod -R u+w $(@D)
	if [ -d $(@D)/templates/crd ]; then \
		sed -i '0,/^  annotations:$$/s//  annotations:\n    helm.sh\/resource-policy: keep/' $(@D)/templates/crd/*.yaml; \
		! grep -L 'helm.sh/resource-policy: keep' $(@D)/templates/crd/*.yaml | grep .; \
	fi
	touch $@

.PHONY: chart-package
chart-package: $(BIN)/helm $(CHART_DEPS) ## Package the chart with its dependencies as bin/charts/kiln-<version>.tgz.
	helm package charts/kiln --destination $(BIN)/charts

.PHONY: chart-deps
chart-deps: $(CHART_DEPS) ## Copy the chart's dependencies, JobSet's and Kueue's upstream charts, from the pinned modules into charts/kiln/charts.

$(BIN)/manifests/jobset.yaml: $(PLATFORM_MODULE) | $(BIN)/kubectl
	@mkdir -p $(@D)
	dir="$$($(call module_dir,platform,sigs.k8s.io/jobset))"; kubectl kustomize "$$dir/config/default" > $@.tmp
	mv $@.tmp $@

$(BIN)/manifests/kueue.yaml: $(PLATFORM_MODULE) | $(BIN)/kubectl
	@mkdir -p $(@D)
	dir="$$($(call module_dir,platform,sigs.k8s.io/kueue))"; kubectl kustomize "$$dir/config/default" > $@.tmp
	mv $@.tmp $@

# Upstream Kubeflow Trainer's CRDs, webhook configurations and runtimes, for `make bench`.
$(BIN)/manifests/trainer.yaml: tools/trainer/go.mod tools/trainer/go.sum | $(BIN)/kubectl
	@mkdir -p $(@D)
	dir="$$($(call module_dir,trainer,github.com/kubeflow/trainer/v2))/manifests/base"; \
		for k in crds webhook runtimes; do echo "---"; kubectl kustomize "$$dir/$$k"; done > $@.tmp
	mv $@.tmp $@

# The PodGroup CRDs of gang scheduling: scheduler-plugins' (the platform's scheduler runs its
# coscheduling plugin, same pinned module), and Volcano's, generated from its pinned API types
# as Volcano generates it (the API module ships no CRD), to check what Kiln renders for it.
$(BIN)/manifests/podgroups-coscheduling.yaml: $(PLATFORM_MODULE)
	@mkdir -p $(@D)
	dir="$$($(call module_dir,platform,sigs.k8s.io/scheduler-plugins))"; cp "$$dir/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" $@.tmp && chmod 644 $@.tmp
	mv $@.tmp $@

$(BIN)/manifests/podgroups-volcano.yaml: operator/go.mod operator/go.sum | $(BIN)/controller-gen
	@mkdir -p $(@D)
	rm -rf $@.d && cd operator && $(BIN)/controller-gen crd paths=volcano.sh/apis/pkg/apis/scheduling/v1beta1 output:crd:dir=$@.d
	mv $@.d/scheduling.volcano.sh_podgroups.yaml $@ && rm -rf $@.d

$(BIN)/manifests/kwok-stages.yaml: $(PLATFORM_MODULE)
	@mkdir -p $(@D)
	dir="$$($(call module_dir,platform,sigs.k8s.io/kwok))/kustomize/stage"; \
		for f in $(KWOK_STAGES); do echo "---"; cat "$$dir/$$f"; done > $@.tmp
	mv $@.tmp $@

##@ Benchmarks

.PHONY: bench
bench: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(BIN)/manifests/trainer.yaml $(BENCH_BINARIES) $(PLATFORM) $(OPERATOR) $(APISERVER) $(KILN) ## Kiln vs upstream Kubeflow Trainer on fresh local platforms; writes docs/benchmarks.md (3 runs each, about 50 min on 2 cores).
	$(PLATFORM) down
	go run ./e2e/cmd/kiln-bench --suite controllers $(BENCH_FLAGS)

.PHONY: bench-quick
bench-quick: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(BIN)/manifests/trainer.yaml $(BENCH_BINARIES) $(PLATFORM) $(OPERATOR) $(APISERVER) $(KILN) ## The headline ratios in under 10 min: one run each of Kiln and upstream, throughput against the limit, webhooks, deadlines and TTLs; writes bin/bench-quick.md (make bench for the figures of record).
	$(PLATFORM) down
	go run ./e2e/cmd/kiln-bench --suite controllers --runs 1 --scenarios deadline,limit --report $(BIN)/bench-quick.md --make-target bench-quick $(BENCH_FLAGS)
	@sed -n '/^| figure/,/^$$/p' $(BIN)/bench-quick.md | grep -v ' — | — | — |'

.PHONY: bench-scale
bench-scale: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(BIN)/manifests/trainer.yaml $(BENCH_BINARIES) $(PLATFORM) $(OPERATOR) $(APISERVER) $(KILN) ## Kiln vs upstream holding 50,000 TrainJobs: RSS and Go heap (one run each, about an hour); writes docs/benchmarks-scale.md.
	$(PLATFORM) down
	go run ./e2e/cmd/kiln-bench --suite controllers --runs 1 --scenarios memory --memory-jobs 50000 --report docs/benchmarks-scale.md --make-target bench-scale $(BENCH_FLAGS)

.PHONY: bench-api
bench-api: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(PLATFORM) $(OPERATOR) $(APISERVER) $(KILN) ## Kiln's API server against direct Kubernetes calls (latency, requests/s, memory); writes docs/benchmarks-api.md (about 4 min).
	$(PLATFORM) down
	go run ./e2e/cmd/kiln-bench --suite api $(BENCH_FLAGS)

.PHONY: bench-api-scale
bench-api-scale: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(PLATFORM) $(OPERATOR) $(APISERVER) $(KILN) ## Kiln's API server against direct Kubernetes calls with 50,000 TrainJobs in a namespace (lists, Gets, kiln list vs kubectl; about 15 min); writes docs/benchmarks-api-scale.md.
	$(PLATFORM) down
	go run ./e2e/cmd/kiln-bench --suite api --api-runs 0 --api-scale-jobs 50000 --api-report docs/benchmarks-api-scale.md $(BENCH_FLAGS)

.PHONY: bench-placement
bench-placement: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(PLATFORM) $(OPERATOR) $(KILN) ## Gang jobs through Kueue with and without topology-aware scheduling (admission to all pods bound); writes docs/benchmarks-placement.md.
	$(PLATFORM) down
	go run ./e2e/cmd/kiln-bench --suite placement $(BENCH_FLAGS)

.PHONY: bench-pods
bench-pods: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(BIN)/manifests/trainer.yaml $(BENCH_BINARIES) $(PLATFORM) $(OPERATOR) $(KILN) $(NODE_BINARIES) $(NODE_IMAGES) node-host-packages ## Real pods on the real node, Kiln vs upstream: submit to every pod running and every rank's first line of training output (2-node torch jobs, direct and through Kueue); writes docs/benchmarks-pods.md.
	$(PLATFORM) down
	go run ./e2e/cmd/kiln-bench --suite pods $(BENCH_FLAGS)

##@ Tools (built once from tools/*/go.mod; rebuilt when a pin changes)

.PHONY: tools
tools: $(PLATFORM_BINARIES) $(CODEGEN_BINARIES) $(BENCH_BINARIES) ## Build every pinned tool into bin/ (the real node's: make node-tools).

.PHONY: node-tools
node-tools: $(NODE_BINARIES) node-host-packages ## Build the real node's binaries: kubelet, kube-proxy, containerd, runc, CNI plugins, CoreDNS, the local-path provisioner.

# What the real node runs from Debian: iptables (kube-proxy, the kubelet, the CNI portmap
# plugin call it), conntrack (kube-proxy clears stale UDP entries with it) and nftables
# (`make down` removes the tables iptables-nft created).
.PHONY: node-host-packages
node-host-packages:
	@command -v iptables-restore >/dev/null && command -v conntrack >/dev/null && command -v nft >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq iptables conntrack nftables; }

# Static, all of them (the kubelet too, unlike upstream's release), so that they, KWOK, JobSet
# and Kueue share every compiled package, and the same binaries go into images.
$(addprefix $(BIN)/,$(filter-out kube-scheduler,$(KUBE_BINARIES)) kubeadm): $(PLATFORM_MODULE)
	cd tools/platform && CGO_ENABLED=0 $(TOOLS_ENV) go build -trimpath -ldflags '-s -w $(KUBE_VERSION_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/$(@F)

# Kubernetes' scheduler with scheduler-plugins' coscheduling plugin registered (gang
# scheduling of PodGroups; tools/platform/cmd/kube-scheduler).
$(BIN)/kube-scheduler: $(PLATFORM_MODULE) tools/platform/cmd/kube-scheduler/main.go
	cd tools/platform && CGO_ENABLED=0 $(TOOLS_ENV) go build -trimpath -ldflags '-s -w $(KUBE_VERSION_LDFLAGS)' -o $@ ./cmd/kube-scheduler

$(BIN)/etcd: tools/etcd/go.mod tools/etcd/go.sum tools/etcd/main.go
	cd tools/etcd && $(TOOLS_ENV) $(GO_BUILD) -o $@ .

$(BIN)/trainer-controller-manager: tools/trainer/go.mod tools/trainer/go.sum
	cd tools/trainer && $(TOOLS_ENV) $(GO_BUILD) -o $@ github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager

$(BIN)/kwok $(BIN)/kwokctl: $(PLATFORM_MODULE)
	cd tools/platform && CGO_ENABLED=0 $(TOOLS_ENV) $(GO_BUILD) -o $@ sigs.k8s.io/kwok/cmd/$(@F)

# JobSet and Kueue are static (no cgo): the same binaries run as the platform's processes
# and, as /manager, in the images of the chart's local install (make addon-images).
$(BIN)/jobset: $(PLATFORM_MODULE)
	cd tools/platform && CGO_ENABLED=0 $(TOOLS_ENV) $(GO_BUILD) -o $@ sigs.k8s.io/jobset

$(BIN)/kueue: $(PLATFORM_MODULE)
	cd tools/platform && CGO_ENABLED=0 $(TOOLS_ENV) $(GO_BUILD) -o $@ sigs.k8s.io/kueue/cmd/kueue

$(BIN)/controller-gen: tools/controller-gen/go.mod tools/controller-gen/go.sum
	cd tools/controller-gen && $(TOOLS_ENV) $(GO_BUILD) -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

# Stamped as helm's own Makefile does: its version, and the Kubernetes version of its client-go
# (1.<minor>), which `helm template` and `helm lint` assume without --kube-version (unstamped:
# v1.20, older than the chart's kubeVersion).
$(BIN)/helm: tools/helm/go.mod tools/helm/go.sum
	cd tools/helm && helm="$$($(TOOLS_ENV) go list -m -f '{{.Version}}' helm.sh/helm/v3)" && \
		client="$$($(TOOLS_ENV) go list -m -f '{{.Version}}' k8s.io/client-go)" && minor="$$(echo "$$client" | cut -d. -f2)" && \
		$(TOOLS_ENV) go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$$helm \
			$(foreach pkg,pkg/lint/rules pkg/chartutil,-X helm.sh/helm/v3/$(pkg).k8sVersionMajor=1 -X helm.sh/helm/v3/$(pkg).k8sVersionMinor=$$minor)" \
		-o $@ helm.sh/helm/v3/cmd/helm

$(BIN)/buf: tools/buf/go.mod tools/buf/go.sum
	cd tools/buf && $(TOOLS_ENV) $(GO_BUILD) -o $@ github.com/bufbuild/buf/cmd/buf

$(BIN)/protoc-gen-go: tools/protoc-gen-go/go.mod tools/protoc-gen-go/go.sum
	cd tools/protoc-gen-go && $(TOOLS_ENV) $(GO_BUILD) -o $@ google.golang.org/protobuf/cmd/protoc-gen-go

$(BIN)/protoc-gen-connect-go: tools/protoc-gen-connect-go/go.mod tools/protoc-gen-connect-go/go.sum
	cd tools/protoc-gen-connect-go && $(TOOLS_ENV) $(GO_BUILD) -o $@ connectrpc.com/connect/cmd/protoc-gen-connect-go

# The real node: kubelet and kube-proxy (tools/platform), containerd, runc, the CNI plugins, CoreDNS,
# the local-path provisioner.
# Static binaries except runc, whose seccomp filter needs cgo and Debian's libseccomp.
$(BIN)/containerd $(BIN)/containerd-shim-runc-v2 $(BIN)/ctr: tools/containerd/go.mod tools/containerd/go.sum
	cd tools/containerd && CGO_ENABLED=0 $(TOOLS_ENV) $(GO_BUILD) -tags no_btrfs -o $@ github.com/containerd/containerd/v2/cmd/$(@F)

$(BIN)/runc: tools/runc/go.mod tools/runc/go.sum
	dpkg -s libseccomp-dev >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq libseccomp-dev; }
	cd tools/runc && CGO_ENABLED=1 $(TOOLS_ENV) $(GO_BUILD) -tags seccomp -o $@ github.com/opencontainers/runc

CNI_PLUGINS := bridge host-local loopback portmap
$(addprefix $(BIN)/cni/,$(CNI_PLUGINS)): tools/cni-plugins/go.mod tools/cni-plugins/go.sum
	@mkdir -p $(@D)
	cd tools/cni-plugins && CGO_ENABLED=0 $(TOOLS_ENV) $(GO_BUILD) -o $@ \
		github.com/containernetworking/plugins/plugins/$(if $(filter host-local,$(@F)),ipam,$(if $(filter portmap,$(@F)),meta,main))/$(@F)

$(BIN)/coredns: tools/coredns/go.mod tools/coredns/go.sum
	cd tools/coredns && CGO_ENABLED=0 $(TOOLS_ENV) $(GO_BUILD) -o $@ github.com/coredns/coredns

$(BIN)/local-path-provisioner: tools/local-path/go.mod tools/local-path/go.sum
	cd tools/local-path && CGO_ENABLED=0 $(TOOLS_ENV) $(GO_BUILD) -o $@ github.com/rancher/local-path-provisioner

$(BIN)/helm-docs: tools/helm-docs/go.mod tools/helm-docs/go.sum
	cd tools/helm-docs && $(TOOLS_ENV) $(GO_BUILD) -o $@ github.com/norwoodj/helm-docs/cmd/helm-docs

$(BIN)/registry: tools/registry/go.mod tools/registry/go.sum tools/registry/main.go
	cd tools/registry && CGO_ENABLED=0 $(TOOLS_ENV) $(GO_BUILD) -o $@ .

$(BIN)/ginkgo: tools/ginkgo/go.mod tools/ginkgo/go.sum
	cd tools/ginkgo && $(TOOLS_ENV) $(GO_BUILD) -o $@ github.com/onsi/ginkgo/v2/ginkgo

$(BIN)/golangci-lint: tools/golangci-lint/go.mod tools/golangci-lint/go.sum
	cd tools/golangci-lint && $(TOOLS_ENV) $(GO_BUILD) -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

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

# Headless Chromium for the console's browser tests: Debian's package (nothing downloads a browser).
.PHONY: chromium
chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; }

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
	command -v shellcheck >/dev/null || { apt-get update -qq && apt-get install -y -qq shellcheck; }
	shellcheck e2e/kind/*.sh

# The servers must not link text/template: a method it calls by name makes the linker keep every
# exported method of every type (KILN_BUILD_FLAGS says what that cost).
.PHONY: binary-deps
binary-deps: ## Check that the operator and the API server do not link text/template.
	@for c in operator/cmd/kiln-operator apiserver/cmd/kiln-apiserver; do \
		by=$$(go list $(KILN_BUILD_FLAGS) -deps -f '{{.ImportPath}} {{join .Imports " "}}' ./$$c | \
			awk '{for (i = 2; i <= NF; i++) if ($$i == "text/template" || $$i == "html/template") print $$1}'); \
		[ -z "$$by" ] || { echo "make verify: ./$$c links text/template (imported by: $$(echo $$by)), which keeps every exported method in the binary; drop that import or build it out with a tag in KILN_BUILD_FLAGS"; exit 1; }; \
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

##@ Test

# Each phase in turn, with its time (CI's log shows where the budget goes).
TEST_PHASES := test-unit test-integration test-e2e test-e2e-multicluster test-e2e-chart test-upgrade
# Against the chart's install, the e2e suite runs the specs labelled chart: what the chart
# changes and a smoke path through every surface (e2e/README.md says which and why).
E2E_CHART_LABELS ?= chart

.PHONY: test
test: ## Run every test: unit, envtest integration, e2e on the local platform (Kiln as processes, then installed by its chart with the conformance suite), the upgrade from the previous release.
	@for phase in $(TEST_PHASES); do start=$$(date +%s); \
		$(MAKE) --no-print-directory $$phase || { echo "make $$phase failed after $$(( $$(date +%s) - start )) s"; exit 1; }; \
		echo "make $$phase took $$(( $$(date +%s) - start )) s"; done

# Each fuzz target and its package; the seeds and committed corpora run in make test-unit.
FUZZ_TARGETS := FuzzValidateTrainJob:./operator/internal/webhook FuzzParseManifest:./apiserver/internal/request \
	FuzzCreateTrainJobRequest:./apiserver/internal/service
FUZZTIME ?= 60s

.PHONY: fuzz
fuzz: ## Fuzz the webhook's validation and rendering and the API server's decoders, FUZZTIME (60s) each.
	for t in $(FUZZ_TARGETS); do go test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) "$${t#*:}"; done

# The long chaos run: a fresh platform, 200 jobs, 1,000 submissions, 24 SIGKILLs; its figures
# go into docs/reliability.md. (`make test` runs a short one in the e2e suite.)
.PHONY: chaos
chaos: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(PLATFORM) $(OPERATOR) $(APISERVER) ## Kill the operator, API server, JobSet and Kueue at random while jobs run; check nothing is missed, doubled or lost; report in docs/reliability.md.
	go run ./e2e/cmd/kiln-chaos

# The conformance suite: the e2e specs labelled conformance, compiled into one binary that
# needs nothing of this repository (a release ships it): KUBECONFIG and, for the API
# server's checks, KILN_CONFIG. Without KUBECONFIG it checks the local platform, whose jobs
# run on the real node with the torch image it imported.
CONFORMANCE := $(BIN)/kiln-conformance
CONFORMANCE_LOCAL := KILN_CONFORMANCE_IMAGE=kiln.local/torch-cpu:1.13 KILN_CONFORMANCE_NODE_SELECTOR=kiln.dev/node-pool=real \
	KILN_CONFORMANCE_TOLERATIONS=kiln.dev/node-pool=real:NoSchedule KILN_CONFIG=$(BIN)/platform/kiln/config.yaml
CONFORMANCE_ON_PLATFORM = $(CONFORMANCE_LOCAL) KUBECONFIG="$$($(PLATFORM) kubeconfig)" $(CONFORMANCE) -ginkgo.no-color $(CONFORMANCE_ARGS)

$(CONFORMANCE): $(call go_sources,e2e api) $(wildcard e2e/test/e2e/*_test.go) go.work
	go test $(KILN_BUILD_FLAGS) -c -ldflags "$(VERSION_LDFLAGS)" -o $@ ./e2e/test/e2e

.PHONY: test-conformance
test-conformance: $(CONFORMANCE) ## Check an install: the conformance suite against KUBECONFIG's cluster (else the local platform's), a report at the end.
	@if [ -n "$$KUBECONFIG" ]; then $(CONFORMANCE) -ginkgo.no-color $(CONFORMANCE_ARGS); else $(CONFORMANCE_ON_PLATFORM); fi

# kind on this machine, offline (e2e/kind/README.md): Debian's dockerd in 100.64.0.0/10, a node
# image built from bin/, the chart from the loaded images, and the conformance suite. Not in
# `make test`: 5 min 15 s with the node image cached in bin/kind-state/ (the first run adds about 3 for debootstrap and the image).
KIND_DEPS := $(BIN)/kind $(BIN)/kubeadm $(addprefix $(BIN)/,kube-apiserver kube-controller-manager kube-scheduler kubectl etcd helm kiln) \
	$(NODE_BINARIES) $(NODE_IMAGES) $(ADDON_IMAGES) $(CHART_DEPS) $(CONFORMANCE)
.PHONY: test-kind kind-down
test-kind: $(KIND_DEPS) ## Kiln on a kind cluster on this machine (offline): dockerd, a node image of our own, the chart, the conformance suite; then down.
	$(MAKE) images IMAGE_PLATFORMS=linux/$(HOST_ARCH)
	e2e/kind/local.sh all

kind-down: ## Delete the kind cluster, stop dockerd and remove its bridges and iptables chains (after KILN_KIND_KEEP=1 make test-kind).
	e2e/kind/local.sh down

# The upgrade from the previous release (docs/install.md, "Upgrades"): release
# UPGRADE_FROM_VERSION, built at its commit by that commit's own `make release` (in a
# worktree, for this machine's architecture only), installed on a fresh platform from the
# registry; jobs, queued jobs and a schedule are started; then `helm upgrade` to this
# clone's chart and images, and the e2e specs labelled upgrade check what the upgrade kept.
UPGRADE_FROM_VERSION := v0.1.0
UPGRADE_FROM_COMMIT := b0addd97bb7be605a5e6bd20d789905924746905
UPGRADE_FROM := $(BIN)/upgrade/$(UPGRADE_FROM_VERSION)

$(UPGRADE_FROM)/SHA256SUMS:
	@git cat-file -e $(UPGRADE_FROM_COMMIT)^{commit} 2>/dev/null || { echo "release $(UPGRADE_FROM_VERSION) is commit $(UPGRADE_FROM_COMMIT), not in this clone: fetch the full history (git fetch --unshallow)"; exit 2; }
	rm -rf $(BIN)/upgrade/src && git worktree prune && git worktree add --detach $(BIN)/upgrade/src $(UPGRADE_FROM_COMMIT)
	$(MAKE) -C $(BIN)/upgrade/src release VERSION=$(UPGRADE_FROM_VERSION) IMAGE_PLATFORMS=linux/$(HOST_ARCH) CLI_PLATFORMS=linux/$(HOST_ARCH)
	rm -rf $(UPGRADE_FROM) && mv $(BIN)/upgrade/src/bin/release/$(UPGRADE_FROM_VERSION) $(UPGRADE_FROM)
	git worktree remove --force $(BIN)/upgrade/src

.PHONY: test-upgrade
test-upgrade: $(UPGRADE_FROM)/SHA256SUMS $(BIN)/ginkgo ## Install the previous release (UPGRADE_FROM_VERSION) by its chart, start jobs and a schedule, upgrade to this build, and check nothing was lost or restarted.
	$(MAKE) platform-down
	KILN_CHART_FROM=$(UPGRADE_FROM) $(MAKE) chart-up
	rc=0; rm -f $(BIN)/e2e-times-upgrade.txt; \
		KILN_ROOT=$(ROOT) KILN_INSTALL=chart KILN_CHART_FROM=$(UPGRADE_FROM) KUBECONFIG="$$($(PLATFORM) kubeconfig)" KILN_CONFIG=$(BIN)/platform/kiln/config.yaml \
		KILN_E2E_TIMES=$(BIN)/e2e-times-upgrade.txt ginkgo --no-color --timeout=20m --label-filter=upgrade ./e2e/test/e2e || rc=$$?; \
		$(MAKE) platform-down || rc=$$?; $(PLATFORM) leftovers || rc=$$?; cat $(BIN)/e2e-times-upgrade.txt 2>/dev/null || true; exit $$rc

# Several clusters: the platform as a MultiKueue manager with two worker clusters (no real
# node: KWOK fleets), and the multi-cluster suite against them (docs/multicluster.md).
.PHONY: test-e2e-multicluster multicluster-up
multicluster-up: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(PLATFORM) $(OPERATOR) $(APISERVER) $(KILN) $(BIN)/helm $(CHART_DEPS) ## Start the local platform as a MultiKueue manager with two worker clusters (KWOK fleets of H100s and A100s), each with JobSet, Kueue and Kiln.
	KILN_WORKERS=2 KILN_REAL_NODES=0 $(PLATFORM) up

test-e2e-multicluster: $(BIN)/ginkgo ## The multi-cluster suite on a fresh manager and two workers (started and stopped around the run).
	$(MAKE) platform-down multicluster-up
	rc=0; rm -f $(BIN)/e2e-times-multicluster.txt; \
		KILN_ROOT=$(ROOT) KILN_WORKERS=2 KILN_REAL_NODES=0 KILN_E2E_TIMES=$(BIN)/e2e-times-multicluster.txt \
		ginkgo --timeout=20m --no-color --poll-progress-after=180s ./e2e/test/multicluster || rc=$$?; \
		$(MAKE) platform-down || rc=$$?; cat $(BIN)/e2e-times-multicluster.txt 2>/dev/null || true; exit $$rc

.PHONY: test-e2e-chart
test-e2e-chart: ## The e2e suite against Kiln installed by its Helm chart on the real node, plus the chart's own specs.
	$(MAKE) test-e2e KILN_INSTALL=chart

.PHONY: test-unit
test-unit: $(SDK_TS_DIST) $(CONSOLE_DEPS) ## Unit tests (no cluster), the SDKs' included (wire format against recorded exchanges).
	go test -count=1 $$(go list $(addprefix ./,$(addsuffix /...,$(GO_MODULES))) | grep -v -e /test/integration -e /test/e2e -e /test/multicluster)
	cd sdk-gen/python && python3 -m unittest discover -s tests -t .
	@# The SDK promises Python 3.9 or newer: test the oldest too where the machine has it.
	@# (pyenv puts a python3.9 shim on PATH that fails unless 3.9 is selected: ask it, then look.)
	py39="$$(python3.9 -c 'import sys; print(sys.executable)' 2>/dev/null || ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.9.*/bin/python3.9 2>/dev/null | tail -1)"; \
	if [ -n "$$py39" ]; then cd sdk-gen/python && "$$py39" -m unittest discover -s tests -t .; \
	else echo "no Python 3.9 here: the Python SDK was tested with $$(python3 --version) only"; fi
	cd $(CONSOLE) && node_modules/.bin/tsc -p tsconfig.json && node build.mjs --tests && node --test dist-test/
	@# Every test file, found by name (live.test.js skips itself without KILN_SDK_LIVE=1; make test-e2e runs it live).
	cd $(SDK_TS) && node --test dist/test/*.test.js

.PHONY: test-integration
# One suite at a time (-p 1): each runs its own kube-apiserver and etcd, and three of them
# with the chart renders on 2 cores starved the operator suite's controller past a 20 s wait.
test-integration: $(BIN)/kube-apiserver $(BIN)/etcd $(BIN)/kubectl $(BIN)/helm $(CHART_DEPS) $(ADDON_MANIFESTS) $(APISERVER) $(KILN) ## envtest integration tests (kube-apiserver + etcd from bin/).
	KILN_UPGRADE_FROM_COMMIT=$(UPGRADE_FROM_COMMIT) go test -p 1 -count=1 $$(go list $(addprefix ./,$(addsuffix /...,$(GO_MODULES))) | grep /test/integration)

# After the run, `kiln-platform leftovers` fails if the real node left anything on this
# machine (processes, mounts, cgroups, the bridge, veths, network namespaces, iptables
# rules or nftables tables, sysctls, files in host paths).
.PHONY: test-e2e
# The e2e suite's specs run in E2E_PROCS processes at once (ginkgo's CLI; `go test` runs one);
# specs marked Serial (they kill components, fill the fleet, or train on the real node) run
# alone, after the others.
E2E_PROCS ?= 3

test-e2e: $(SDK_TS_DIST) $(CONSOLE_DIST) $(BIN)/ginkgo $(CONFORMANCE) chromium ## End-to-end tests on a fresh local platform (started and stopped around the run), then a check that `down` left nothing behind; KILN_INSTALL=chart runs them against the Helm chart's install.
	$(MAKE) platform-down $(if $(filter chart,$(KILN_INSTALL)),chart-up,platform-up)
	rc=0; rm -f $(BIN)/e2e-times-$(KILN_INSTALL).txt; \
	$(if $(filter chart,$(KILN_INSTALL)),$(CONFORMANCE_ON_PLATFORM) || rc=$$?;) \
	KILN_ROOT=$(ROOT) KILN_REAL_NODES=$(KILN_REAL_NODES) KILN_INSTALL=$(KILN_INSTALL) KUBECONFIG="$$($(PLATFORM) kubeconfig)" KILN_CONFIG=$(BIN)/platform/kiln/config.yaml \
		KILN_E2E_TIMES=$(BIN)/e2e-times-$(KILN_INSTALL).txt \
		ginkgo --procs=$(E2E_PROCS) --timeout=30m --no-color --poll-progress-after=180s \
			$(if $(filter chart,$(KILN_INSTALL)),--label-filter=$(E2E_CHART_LABELS)) ./e2e/test/e2e || rc=$$?; \
		$(MAKE) platform-down || rc=$$?; $(PLATFORM) leftovers || rc=$$?; \
		cat $(BIN)/e2e-times-$(KILN_INSTALL).txt 2>/dev/null || true; exit $$rc
