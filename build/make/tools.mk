# The pinned tools and the host packages (included by the Makefile; `make help` lists the targets).

##@ Tools (built once from tools/*/go.mod; rebuilt when a pin changes)

.PHONY: tools
tools: $(PLATFORM_BINARIES) $(CODEGEN_BINARIES) $(BENCH_BINARIES) ## Build every pinned tool into bin/ (the real node's: make node-tools).

.PHONY: node-tools
node-tools: $(NODE_BINARIES) node-host-packages ## Build the real node's binaries: kubelet, kube-proxy, containerd, runc, CNI plugins, CoreDNS, the local-path provisioner.

# The Debian packages the build and the real node use, installed when missing: the only
# place that runs apt. $(call apt_install,CHECK,PACKAGES) installs PACKAGES unless CHECK succeeds.
apt_install = @{ $(1); } >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2); }

# What the real node runs from Debian: iptables (kube-proxy, the kubelet, the CNI portmap
# plugin call it), conntrack (kube-proxy clears stale UDP entries with it) and nftables
# (`make down` removes the tables iptables-nft created).
.PHONY: node-host-packages
node-host-packages:
	$(call apt_install,command -v iptables-restore && command -v conntrack && command -v nft,iptables conntrack nftables)

# Debian's PyTorch for the system Python: the Python SDK's local backend runs its DDP example
# with it (the SDK tests find the interpreter that imports torch).
.PHONY: python-torch
python-torch:
	$(call apt_install,/usr/bin/python3 -c 'import torch',--no-install-recommends python3-torch)

# Headless Chromium for the console's browser tests: Debian's package (nothing downloads a browser).
.PHONY: chromium
chromium:
	$(call apt_install,command -v chromium,--no-install-recommends chromium fonts-dejavu-core)

# Debian's CA certificates, which Kiln's base image carries; debootstrap, which builds the
# torch-cpu image's root filesystem.
.PHONY: image-host-packages
image-host-packages:
	$(call apt_install,dpkg -s ca-certificates,ca-certificates)
	$(call apt_install,command -v debootstrap,debootstrap)

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
	$(call apt_install,dpkg -s libseccomp-dev,libseccomp-dev)
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
