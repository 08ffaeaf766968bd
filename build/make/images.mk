# Images, releases and the chart (included by the Makefile; `make help` lists the targets).

##@ Images

# Built without a Docker engine (go-containerregistry, build/images): static binaries
# per platform, on a minimal base (nonroot 65532, Debian's CA certificates), as OCI archives.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGES_BUILD := $(BIN)/images/build
comma := ,

.PHONY: images
images: $(CONSOLE_DIST) image-host-packages ## Build Kiln's images (base, pause, kiln-operator, kiln-apiserver, kiln) as OCI archives in bin/images; reproducible.
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

$(TORCH_ROOTFS)/.done: e2e/images/torch-cpu/packages e2e/images/torch-cpu/customize.sh | image-host-packages
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
release: ## Build release VERSION (vX.Y.Z) in bin/release/VERSION: images tagged VERSION, the chart and SDK packages versioned X.Y.Z, CLI binaries, notes, SHA256SUMS.
release: $(BIN)/helm $(CHART_DEPS) $(SDK_TS_DIST)
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
