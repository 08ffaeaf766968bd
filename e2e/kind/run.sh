#!/usr/bin/env bash
# Kiln's GPU e2e run on a kind cluster, for a Linux host with Docker, an NVIDIA GPU, its
# driver and the NVIDIA Container Toolkit (see README.md). It cannot run on the machines
# Kiln is developed on (no Docker engine, no GPU); README.md says what was run where.
#
#   e2e/kind/run.sh [all|cluster|gpu-operator|kiln|test|down]
#
# all (the default) creates the cluster with nvkind, installs the NVIDIA GPU operator (the
# host's driver and toolkit, not the operator's), loads Kiln's images with `kind load
# image-archive`, installs the chart, runs `helm test`, then a TrainJob that asks for
# nvidia.com/gpu: 1 and runs nvidia-smi.
set -Eeuo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd -- "${here}/../.." && pwd)"
cluster="${KIND_CLUSTER:-kiln-gpu}"
context="kind-${cluster}"
namespace="${KILN_NAMESPACE:-kiln-system}"
gpu_operator_version="${GPU_OPERATOR_VERSION:-v25.10.1}"
timeout="${KILN_KIND_TIMEOUT:-15m}"
images=(kiln-operator kiln-apiserver kiln)

log() { printf '[kiln-kind] %s\n' "$*"; }
fail() {
	printf '[kiln-kind] error: %s\n' "$*" >&2
	exit 1
}

need() {
	local tool
	for tool in "$@"; do
		command -v "${tool}" >/dev/null 2>&1 || fail "${tool} is required: see e2e/kind/README.md"
	done
}

kubectl_() { kubectl --context "${context}" "$@"; }
helm_() { helm --kube-context "${context}" "$@"; }

check_host() {
	need docker kind nvkind kubectl helm go make
	docker info >/dev/null 2>&1 || fail "the Docker engine does not answer (docker info)"
	nvidia-smi -L >/dev/null 2>&1 || fail "no working NVIDIA driver on the host (nvidia-smi -L)"
	grep -Eq '^ *accept-nvidia-visible-devices-as-volume-mounts *= *true' /etc/nvidia-container-runtime/config.toml ||
		fail "set accept-nvidia-visible-devices-as-volume-mounts = true in /etc/nvidia-container-runtime/config.toml (nvidia-ctk config --set ... --in-place) and restart Docker"
}

create_cluster() {
	check_host
	if kind get clusters | grep -qx "${cluster}"; then
		log "cluster ${cluster} exists"
		return
	fi
	log "creating cluster ${cluster} with nvkind"
	nvkind cluster create --name "${cluster}" \
		--config-template "${here}/nvkind-config.yaml.tmpl" --config-values "${here}/nvkind-values.yaml"
	kubectl_ wait --for=condition=Ready nodes --all --timeout="${timeout}"
}

install_gpu_operator() {
	log "installing the NVIDIA GPU operator ${gpu_operator_version} (driver and toolkit from the host)"
	helm_ repo add nvidia https://helm.ngc.nvidia.com/nvidia --force-update >/dev/null
	kubectl_ create namespace gpu-operator --dry-run=client -o yaml | kubectl_ apply -f -
	kubectl_ label namespace gpu-operator pod-security.kubernetes.io/enforce=privileged --overwrite
	helm_ upgrade --install gpu-operator nvidia/gpu-operator --version "${gpu_operator_version}" \
		--namespace gpu-operator --wait --timeout "${timeout}" \
		--set driver.enabled=false --set toolkit.enabled=false --set cdi.enabled=true
	log "waiting for a node to offer nvidia.com/gpu"
	local deadline=$((SECONDS + 600))
	until kubectl_ get nodes -o jsonpath='{.items[*].status.allocatable.nvidia\.com/gpu}' | grep -q '[1-9]'; do
		((SECONDS < deadline)) || fail "no node offers nvidia.com/gpu after 10 minutes: kubectl --context ${context} -n gpu-operator get pods"
		sleep 10
	done
}

install_kiln() {
	local tag
	tag="$(git -C "${root}" describe --tags --always --dirty)"
	log "building Kiln's images (${tag}) and the chart's dependencies"
	make -C "${root}" images chart-deps IMAGE_PLATFORMS="linux/$(go env GOARCH)" KILN_VERSION="${tag}"
	local image
	for image in "${images[@]}"; do
		kind load image-archive "${root}/bin/images/${image}.tar" --name "${cluster}"
	done
	log "installing the chart in ${namespace}"
	helm_ upgrade --install kiln "${root}/charts/kiln" --namespace "${namespace}" --create-namespace \
		--values "${here}/values.yaml" --set operator.image.tag="${tag}" --set apiserver.image.tag="${tag}" \
		--set tests.image.tag="${tag}" --wait --timeout "${timeout}"
}

run_tests() {
	log "helm test: a TrainJob submitted through Kiln's API server"
	helm_ test kiln --namespace "${namespace}" --timeout "${timeout}"
	log "a TrainJob asking for nvidia.com/gpu: 1, running nvidia-smi"
	kubectl_ delete trainjob nvidia-smi --namespace default --ignore-not-found --wait
	kubectl_ apply -f "${here}/gpu-trainjob.yaml"
	kubectl_ wait trainjob/nvidia-smi --namespace default --for=condition=Complete --timeout="${timeout}"
	local logs
	logs="$(kubectl_ logs --namespace default -l jobset.sigs.k8s.io/jobset-name=nvidia-smi --tail=-1)"
	printf '%s\n' "${logs}"
	grep -q 'NVIDIA-SMI' <<<"${logs}" || fail "the TrainJob's log has no nvidia-smi output"
	log "passed"
}

delete_cluster() {
	need kind
	kind delete cluster --name "${cluster}"
}

case "${1:-all}" in
all)
	create_cluster
	install_gpu_operator
	install_kiln
	run_tests
	;;
cluster) create_cluster ;;
gpu-operator) install_gpu_operator ;;
kiln) install_kiln ;;
test) run_tests ;;
down) delete_cluster ;;
*)
	echo "usage: $0 [all|cluster|gpu-operator|kiln|test|down]" >&2
	exit 2
	;;
esac
