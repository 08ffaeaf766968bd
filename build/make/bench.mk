# Benchmarks (included by the Makefile; `make help` lists the targets).

##@ Benchmarks

# Every benchmark stops any running platform and runs kiln-bench, which starts fresh ones:
# the arguments of each (bench_args_<target>) and what it needs beyond Kiln and the platform.
BENCHES := bench bench-quick bench-scale bench-api bench-api-scale bench-placement bench-pods bench-function
BENCH_UPSTREAM := $(BIN)/manifests/trainer.yaml $(BENCH_BINARIES)

bench: $(BENCH_UPSTREAM) $(APISERVER) ## Kiln vs upstream Kubeflow Trainer on fresh local platforms; writes docs/benchmarks.md (3 runs each, about 50 min on 2 cores).
bench_args_bench := --suite controllers

bench-quick: ## The headline ratios in under 10 min (one run each: throughput, webhooks, deadlines, TTLs); writes bin/bench-quick.md.
bench-quick: $(BENCH_UPSTREAM) $(APISERVER)
bench_args_bench-quick := --suite controllers --runs 1 --scenarios deadline,limit --report $(BIN)/bench-quick.md --make-target bench-quick
bench_then_bench-quick = @sed -n '/^| figure/,/^$$/p' $(BIN)/bench-quick.md | grep -v ' — | — | — |'

bench-scale: $(BENCH_UPSTREAM) $(APISERVER) ## Kiln vs upstream holding 50,000 TrainJobs: RSS and Go heap (one run each, about an hour); writes docs/benchmarks-scale.md.
bench_args_bench-scale := --suite controllers --runs 1 --scenarios memory --memory-jobs 50000 --report docs/benchmarks-scale.md --make-target bench-scale

bench-api: $(APISERVER) ## Kiln's API server against direct Kubernetes calls (latency, requests/s, memory); writes docs/benchmarks-api.md (about 4 min).
bench_args_bench-api := --suite api

bench-api-scale: ## Kiln's API server against direct Kubernetes calls with 50,000 TrainJobs in a namespace (lists, Gets, kiln list vs kubectl; about 15 min); writes docs/benchmarks-api-scale.md.
bench-api-scale: $(APISERVER)
bench_args_bench-api-scale := --suite api --api-runs 0 --api-scale-jobs 50000 --api-report docs/benchmarks-api-scale.md

bench-placement: ## Gang jobs through Kueue with and without topology-aware scheduling (admission to all pods bound); writes docs/benchmarks-placement.md.
bench_args_bench-placement := --suite placement

bench-pods: ## Real 2-node torch jobs on the real node, Kiln vs upstream: submit to pods running and first training line; writes docs/benchmarks-pods.md.
bench-pods: $(BENCH_UPSTREAM) $(NODE_DEPS)
bench_args_bench-pods := --suite pods

bench-function: ## A Python function as the trainer (the SDK's CustomTrainer) vs the same training as a container command, real 2-node torch jobs on the real node: submit to first training line; writes docs/benchmarks-function.md.
bench-function: $(NODE_DEPS)
bench_args_bench-function := --suite pods --trainers kiln --pods-variants direct,function --pods-report docs/benchmarks-function.md

.PHONY: $(BENCHES)
$(BENCHES): $(PLATFORM_BINARIES) $(ADDON_MANIFESTS) $(PLATFORM) $(OPERATOR) $(KILN)
	$(PLATFORM) down
	go run ./e2e/cmd/kiln-bench $(bench_args_$@) $(BENCH_FLAGS)
	$(bench_then_$@)
