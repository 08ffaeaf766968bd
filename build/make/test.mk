# Tests (included by the Makefile; `make help` lists the targets).

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
chaos: ## Kill the operator, API server, JobSet and Kueue at random while jobs run; check nothing is missed, doubled or lost; report in docs/reliability.md.
chaos: $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(PLATFORM) $(OPERATOR) $(APISERVER)
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
# `make test` (docs/build-times.md has its time).
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
	@git cat-file -e $(UPGRADE_FROM_COMMIT)^{commit} 2>/dev/null || { echo "release $(UPGRADE_FROM_VERSION) is commit \
		$(UPGRADE_FROM_COMMIT), not in this clone: fetch the full history (git fetch --unshallow)"; exit 2; }
	rm -rf $(BIN)/upgrade/src && git worktree prune && git worktree add --detach $(BIN)/upgrade/src $(UPGRADE_FROM_COMMIT)
	$(MAKE) -C $(BIN)/upgrade/src release VERSION=$(UPGRADE_FROM_VERSION) IMAGE_PLATFORMS=linux/$(HOST_ARCH) CLI_PLATFORMS=linux/$(HOST_ARCH)
	rm -rf $(UPGRADE_FROM) && mv $(BIN)/upgrade/src/bin/release/$(UPGRADE_FROM_VERSION) $(UPGRADE_FROM)
	git worktree remove --force $(BIN)/upgrade/src

.PHONY: test-upgrade
test-upgrade: ## Install the previous release (UPGRADE_FROM_VERSION) by its chart, start jobs and a schedule, upgrade to this build, and check nothing was lost or restarted.
test-upgrade: $(UPGRADE_FROM)/SHA256SUMS $(BIN)/ginkgo
	$(MAKE) down
	KILN_CHART_FROM=$(UPGRADE_FROM) $(MAKE) chart-up
	rc=0; rm -f $(BIN)/e2e-times-upgrade.txt; \
		KILN_ROOT=$(ROOT) KILN_INSTALL=chart KILN_CHART_FROM=$(UPGRADE_FROM) KUBECONFIG="$$($(PLATFORM) kubeconfig)" KILN_CONFIG=$(BIN)/platform/kiln/config.yaml \
		KILN_E2E_TIMES=$(BIN)/e2e-times-upgrade.txt ginkgo --no-color --timeout=20m --label-filter=upgrade ./e2e/test/e2e || rc=$$?; \
		$(MAKE) down || rc=$$?; $(PLATFORM) leftovers || rc=$$?; cat $(BIN)/e2e-times-upgrade.txt 2>/dev/null || true; exit $$rc

# Several clusters: the platform as a MultiKueue manager with two worker clusters (no real
# node: KWOK fleets), and the multi-cluster suite against them (docs/multicluster.md).
.PHONY: test-e2e-multicluster multicluster-up
multicluster-up: ## Start the local platform as a MultiKueue manager with two worker clusters (KWOK fleets of H100s and A100s), each with JobSet, Kueue and Kiln.
multicluster-up: $(PLATFORM_DEPS) $(KILN_BINARIES) $(BIN)/helm $(CHART_DEPS)
	KILN_WORKERS=2 KILN_REAL_NODES=0 $(PLATFORM) up

test-e2e-multicluster: $(BIN)/ginkgo ## The multi-cluster suite on a fresh manager and two workers (started and stopped around the run).
	$(MAKE) down multicluster-up
	rc=0; rm -f $(BIN)/e2e-times-multicluster.txt; \
		KILN_ROOT=$(ROOT) KILN_WORKERS=2 KILN_REAL_NODES=0 KILN_E2E_TIMES=$(BIN)/e2e-times-multicluster.txt \
		ginkgo --timeout=20m --no-color --poll-progress-after=180s ./e2e/test/multicluster || rc=$$?; \
		$(MAKE) down || rc=$$?; cat $(BIN)/e2e-times-multicluster.txt 2>/dev/null || true; exit $$rc

.PHONY: test-e2e-chart
test-e2e-chart: ## The e2e suite against Kiln installed by its Helm chart on the real node, plus the chart's own specs.
	$(MAKE) test-e2e KILN_INSTALL=chart

.PHONY: test-unit
test-unit: $(SDK_TS_DIST) $(CONSOLE_DEPS) python-torch ## Unit tests (no cluster), the SDKs' included (wire format against recorded exchanges).
	go test -count=1 $$(go list $(addprefix ./,$(addsuffix /...,$(GO_MODULES))) | grep -v -e /test/integration -e /test/e2e -e /test/multicluster)
	cd sdk-gen/python && python3 -m unittest discover -s tests -t .
	@# The SDK promises Python 3.9 or newer: test the oldest too where the machine has it.
	@# (pyenv puts a python3.9 shim on PATH that fails unless 3.9 is selected: ask it, then look.)
	py39="$$(python3.9 -c 'import sys; print(sys.executable)' 2>/dev/null || ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.9.*/bin/python3.9 2>/dev/null | tail -1)"; \
	if [ -n "$$py39" ]; then cd sdk-gen/python && KILN_SDK_TORCH_TESTS=0 "$$py39" -m unittest discover -s tests -t .; \
	else echo "no Python 3.9 here: the Python SDK was tested with $$(python3 --version) only"; fi
	cd $(CONSOLE) && node_modules/.bin/tsc -p tsconfig.json && node build.mjs --tests && node --test dist-test/
	@# Every test file, found by name (live.test.js skips itself without KILN_SDK_LIVE=1; make test-e2e runs it live).
	cd $(SDK_TS) && node --test dist/test/*.test.js

.PHONY: test-integration
# One suite at a time (-p 1): each runs its own kube-apiserver and etcd, and several at once
# on 2 cores starve each other's controllers past their waits.
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

test-e2e: ## End-to-end tests on a fresh local platform, then a check that `down` left nothing behind; KILN_INSTALL=chart: against the chart's install.
test-e2e: $(SDK_TS_DIST) $(CONSOLE_DIST) $(BIN)/ginkgo $(CONFORMANCE) chromium
	$(MAKE) down $(if $(filter chart,$(KILN_INSTALL)),chart-up,up)
	rc=0; rm -f $(BIN)/e2e-times-$(KILN_INSTALL).txt; \
	$(if $(filter chart,$(KILN_INSTALL)),$(CONFORMANCE_ON_PLATFORM) || rc=$$?;) \
	KILN_ROOT=$(ROOT) KILN_REAL_NODES=$(KILN_REAL_NODES) KILN_INSTALL=$(KILN_INSTALL) KUBECONFIG="$$($(PLATFORM) kubeconfig)" KILN_CONFIG=$(BIN)/platform/kiln/config.yaml \
		KILN_E2E_TIMES=$(BIN)/e2e-times-$(KILN_INSTALL).txt \
		ginkgo --procs=$(E2E_PROCS) --timeout=30m --no-color --poll-progress-after=180s \
			$(if $(filter chart,$(KILN_INSTALL)),--label-filter=$(E2E_CHART_LABELS)) ./e2e/test/e2e || rc=$$?; \
		$(MAKE) down || rc=$$?; $(PLATFORM) leftovers || rc=$$?; \
		cat $(BIN)/e2e-times-$(KILN_INSTALL).txt 2>/dev/null || true; exit $$rc
