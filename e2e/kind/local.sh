#!/usr/bin/env bash
# Kiln on a kind cluster on this machine, offline: no image is pulled from anywhere (see
# README.md, "On this machine: kind without a network"). `make test-kind` runs it all.
#
#   e2e/kind/local.sh [all|docker|node-image|cluster|kiln|conformance|down]
#
# docker      starts Debian's dockerd with its own data root, socket and bridges, all in
#             100.64.0.0/10 (never Docker's default 172.17.0.0/16), and the `kind` network;
# node-image  builds kind's node image kind.local/node:<Kubernetes version> from a Debian
#             bookworm root filesystem (debootstrap) and the binaries in bin/ (kubeadm,
#             kubelet, containerd, runc, the CNI plugins, and the control plane's images
#             made from bin/'s kube-apiserver, etcd, CoreDNS...);
# cluster     `kind create cluster` on it (cgroup v1: failCgroupV1: false);
# kiln        `kind load image-archive` of Kiln's, JobSet's, Kueue's and the torch images,
#             then the chart from charts/kiln with local-values.yaml, and `helm test`;
# conformance bin/kiln-conformance against the cluster, the API server reached through
#             `kubectl port-forward` as a user bound to kiln-user;
# down        deletes the cluster, stops dockerd, and removes its bridges and iptables
#             chains, restoring the FORWARD policy it changed.
# all (the default) runs docker, node-image, cluster, kiln and conformance, then down
# (KILN_KIND_KEEP=1 keeps the cluster and dockerd running).
set -Eeuo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd -- "${here}/../.." && pwd)"
bin="${root}/bin"
state="${bin}/kind-state"
cluster="${KIND_CLUSTER:-kiln}"
namespace="${KILN_NAMESPACE:-kiln-system}"
timeout="${KILN_KIND_TIMEOUT:-10m}"
kube_version="$("${bin}/kubeadm" version -o short 2>/dev/null || echo none)"
arch="$(go env GOARCH)"
node_image="kind.local/node:${kube_version}"
kubeconfig="${state}/kubeconfig"
export DOCKER_HOST="unix://${state}/docker.sock"
export PATH="${bin}:${PATH}"

# Addresses, all in 100.64.0.0/10: dockerd's default bridge, its pool for networks, the
# kind network, and inside the node the pods and the Services.
docker_bip=100.79.0.1/24
docker_pool=100.78.0.0/16
kind_subnet=100.80.0.0/24
pod_subnet=100.81.0.0/16
service_subnet=100.82.0.0/16

log() { printf '[kiln-kind] %s\n' "$*" >&2; }
fail() {
	printf '[kiln-kind] error: %s\n' "$*" >&2
	exit 1
}
kubectl_() { kubectl --kubeconfig "${kubeconfig}" "$@"; }
helm_() { helm --kubeconfig "${kubeconfig}" "$@"; }

apt_install() { # command package
	command -v "$1" >/dev/null 2>&1 && return
	log "installing $2 from Debian"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

docker_up() {
	apt_install dockerd docker.io
	apt_install debootstrap debootstrap
	apt_install jq jq
	mkdir -p "${state}/docker" "${state}/exec"
	if docker info >/dev/null 2>&1; then
		log "dockerd is running (${DOCKER_HOST})"
	else
		# dockerd sets the FORWARD policy to DROP; down puts back what it was.
		iptables -S FORWARD | awk 'NR == 1 {print $3}' >"${state}/forward-policy"
		local runtime=runc
		# A privileged container (a kind node) asks for every capability; runc cannot
		# grant one the machine's bounding set lacks (this VM's root has no
		# CAP_SYS_RESOURCE). runc-wrap drops those from the container's spec.
		if ((!(0x$(awk '/^CapBnd/ {print $2}' /proc/self/status) >> 24 & 1))); then # bit 24: CAP_SYS_RESOURCE
			runtime=kiln-runc
		fi
		cat >"${state}/daemon.json" <<-EOF
			{
			  "bip": "${docker_bip}",
			  "default-address-pools": [{"base": "${docker_pool}", "size": 24}],
			  "runtimes": {"kiln-runc": {"path": "${here}/runc-wrap"}},
			  "default-runtime": "${runtime}",
			  "storage-driver": "overlay2",
			  "log-driver": "json-file"
			}
		EOF
		log "starting dockerd (bridge ${docker_bip}, pool ${docker_pool}, runtime ${runtime})"
		dockerd --config-file "${state}/daemon.json" --data-root "${state}/docker" --exec-root "${state}/exec" \
			--host "${DOCKER_HOST}" --pidfile "${state}/dockerd.pid" >"${state}/dockerd.log" 2>&1 &
		local i
		for i in $(seq 60); do
			docker info >/dev/null 2>&1 && break
			((i < 60)) || fail "dockerd did not answer in 60 s: ${state}/dockerd.log"
			sleep 1
		done
	fi
	if ! docker network inspect kind >/dev/null 2>&1; then
		# kind takes an existing `kind` network as it is.
		docker network create -d bridge --subnet "${kind_subnet}" kind >/dev/null
	fi
}

rootfs() { # a Debian bookworm root filesystem with what kind's base image has (systemd 252: newer ones refuse cgroup v1)
	local tar="${state}/rootfs-bookworm.tar"
	if [[ ! -f "${tar}" ]]; then
		log "debootstrap: Debian bookworm (once, cached in ${tar})"
		rm -rf "${state}/rootfs.tmp"
		debootstrap --variant=minbase \
			--include=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,ca-certificates,procps,jq,e2fsprogs \
			bookworm "${state}/rootfs.tmp" http://deb.debian.org/debian >"${state}/debootstrap.log" 2>&1 ||
			fail "debootstrap failed: ${state}/debootstrap.log"
		tar -C "${state}/rootfs.tmp" -cf "${tar}.tmp" . && mv "${tar}.tmp" "${tar}"
		rm -rf "${state}/rootfs.tmp"
	fi
	echo "${tar}"
}

image_from() { # name dir [entrypoint]: an image of one directory, by docker import
	local changes=(--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin')
	[[ -n "${3:-}" ]] && changes+=(--change "ENTRYPOINT [\"$3\"]")
	tar -C "$2" -c . | docker import "${changes[@]}" - "$1" >/dev/null
}

node_inputs() { # what the node image is made of: this script, kind's base files (its pin) and the binaries it puts in
	(
		cd "${bin}"
		sha256sum "${here}/local.sh" "${root}/tools/kind/go.mod" kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler \
			kube-proxy etcd coredns containerd ctr containerd-shim-runc-v2 runc cni/{host-local,loopback,portmap,bridge} \
			"images/build/linux_${arch}/kiln-pause" | sha256sum | cut -d' ' -f1
	)
}

node_image() {
	local inputs
	inputs="$(node_inputs)"
	if docker image inspect "${node_image}" >/dev/null 2>&1 && [[ "$(cat "${state}/node-image.inputs" 2>/dev/null)" == "${inputs}" ]]; then
		log "node image ${node_image} is up to date with bin/"
		return
	fi
	rm -f "${state}/node-image.inputs"
	local tar kind_mod r t
	tar="$(rootfs)"
	kind_mod="$(cd "${root}/tools/kind" && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/kind)"
	r="${state}/node-rootfs"
	t="${state}/images"
	rm -rf "${r}" "${t}"
	mkdir -p "${r}" "${t}"
	tar -C "${r}" -xf "${tar}"

	log "node image: kind's base files (${kind_mod#"$(go env GOMODCACHE)/"}/images/base/files)"
	cp -a "${kind_mod}/images/base/files/." "${r}/"
	chmod -R u+w "${r}/etc" "${r}/kind" "${r}/usr/local"
	chmod 755 "${r}/usr/local/bin/entrypoint" "${r}/usr/local/bin/clean-install" "${r}"/kind/bin/*.sh
	# Without CAP_SYS_RESOURCE no process may lower its oom_score_adj: containerd must not ask.
	sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "${r}/etc/containerd/config.toml"
	# As kind's base image: only the units a node needs.
	rm -f "${r}"/lib/systemd/system/multi-user.target.wants/* "${r}"/etc/systemd/system/*.wants/* \
		"${r}"/lib/systemd/system/local-fs.target.wants/* "${r}"/lib/systemd/system/sockets.target.wants/*udev* \
		"${r}"/lib/systemd/system/sockets.target.wants/*initctl* "${r}"/lib/systemd/system/basic.target.wants/* \
		"${r}/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service"
	grep -q ReadKMsg=no "${r}/etc/systemd/journald.conf" || echo "ReadKMsg=no" >>"${r}/etc/systemd/journald.conf"
	ln -sf /usr/lib/systemd/systemd "${r}/sbin/init"
	chroot "${r}" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
	chroot "${r}" systemctl mask systemd-binfmt.service >/dev/null 2>&1
	mkdir -p "${r}/etc/kubernetes/manifests" "${r}/opt/cni/bin" "${r}/usr/local/sbin" "${r}/etc/cni/net.d" "${r}/var/lib/etcd"

	log "node image: binaries from bin/"
	install -m755 "${bin}/containerd" "${bin}/ctr" "${bin}/containerd-shim-runc-v2" "${r}/usr/local/bin/"
	install -m755 "${bin}/runc" "${r}/usr/local/sbin/runc"
	install -m755 "${bin}"/cni/{host-local,loopback,portmap,bridge} "${r}/opt/cni/bin/"
	install -m755 "${bin}/kubeadm" "${bin}/kubelet" "${bin}/kubectl" "${r}/usr/bin/"
	# Run by their images, which are this root filesystem (they need its glibc or iptables).
	install -m755 "${bin}/etcd" "${bin}/kube-proxy" "${r}/usr/local/bin/"
	"${bin}/ctr" oci spec |
		jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
		jq 'del(.process.rlimits)' >"${r}/etc/containerd/cri-base.json"
	echo "${kube_version}" >"${r}/kind/version"
	# The pod network: the bridge plugin (kind's kindnetd would have to be pulled).
	cat >"${r}/etc/cni/net.d/10-bridge.conflist" <<-EOF
		{"cniVersion": "1.0.0", "name": "kind-bridge", "plugins": [
		  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
		   "ipam": {"type": "host-local", "ranges": [[{"subnet": "${pod_subnet%.0.0/16}.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
		  {"type": "portmap", "capabilities": {"portMappings": true}}]}
	EOF

	log "node image: the control plane's images, by the names kubeadm ${kube_version} asks for"
	local name c images=()
	while read -r name; do
		c="${name##*/}"
		c="${c%%:*}"
		case "${c}" in
		kube-apiserver | kube-controller-manager | kube-scheduler)
			mkdir -p "${t}/${c}/usr/local/bin" "${t}/${c}/tmp"
			install -m755 "${bin}/${c}" "${t}/${c}/usr/local/bin/"
			image_from "${name}" "${t}/${c}"
			;;
		etcd | kube-proxy) image_from "${name}" "${r}" ;;
		coredns)
			mkdir -p "${t}/coredns"
			install -m755 "${bin}/coredns" "${t}/coredns/coredns"
			image_from "${name}" "${t}/coredns" /coredns
			;;
		pause)
			mkdir -p "${t}/pause"
			install -m755 "${bin}/images/build/linux_${arch}/kiln-pause" "${t}/pause/pause"
			image_from "${name}" "${t}/pause" /pause
			# containerd's configuration names its own sandbox image.
			local sandbox
			sandbox="$(sed -n 's/.*sandbox_image = "\(.*\)"/\1/p' "${r}/etc/containerd/config.toml")"
			if [[ -n "${sandbox}" && "${sandbox}" != "${name}" ]]; then
				docker tag "${name}" "${sandbox}"
				images+=("${sandbox}")
			fi
			;;
		*) fail "kubeadm asks for an image this script does not build: ${name}" ;;
		esac
		images+=("${name}")
	done < <("${bin}/kubeadm" config images list --kubernetes-version "${kube_version}")
	docker save -o "${t}/images.tar" "${images[@]}"

	log "node image: ${node_image}"
	tar -C "${r}" -c . | docker import --change 'ENV container=docker' \
		--change 'ENTRYPOINT ["/usr/local/bin/entrypoint","/sbin/init"]' - "${node_image}-stage" >/dev/null
	# systemd stops on SIGRTMIN+3; docker import cannot set STOPSIGNAL, the classic builder can.
	printf 'FROM %s-stage\nSTOPSIGNAL SIGRTMIN+3\n' "${node_image}" | DOCKER_BUILDKIT=0 docker build -q -t "${node_image}-signal" - >/dev/null
	# The images, pinned in the node's containerd, as kind's own node images have them.
	docker rm -f -v kiln-kind-build >/dev/null 2>&1 || true
	docker run -d --privileged --name kiln-kind-build --entrypoint sleep "${node_image}-signal" infinity >/dev/null
	docker exec kiln-kind-build bash -c 'containerd >/tmp/containerd.log 2>&1 &'
	for _ in $(seq 30); do docker exec kiln-kind-build ctr version >/dev/null 2>&1 && break; sleep 1; done
	docker exec -i kiln-kind-build ctr -n k8s.io images import --label=io.cri-containerd.pinned=pinned \
		--all-platforms --no-unpack --digests - <"${t}/images.tar" >/dev/null
	docker exec kiln-kind-build bash -c 'kill $(pidof containerd); while pidof containerd >/dev/null; do sleep 0.2; done'
	docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint","/sbin/init"]' kiln-kind-build "${node_image}" >/dev/null
	docker rm -f -v kiln-kind-build >/dev/null
	docker rmi "${node_image}-signal" "${node_image}-stage" >/dev/null
	rm -rf "${r}" "${t}"
	echo "${inputs}" >"${state}/node-image.inputs"
}

create_cluster() {
	if kind get clusters 2>/dev/null | grep -qx "${cluster}"; then
		log "cluster ${cluster} exists"
	else
		log "kind create cluster ${cluster} (${node_image})"
		sed -e "s#@POD_SUBNET@#${pod_subnet}#" -e "s#@SERVICE_SUBNET@#${service_subnet}#" \
			"${here}/local-cluster.yaml" >"${state}/cluster.yaml"
		kind create cluster --name "${cluster}" --image "${node_image}" --config "${state}/cluster.yaml" \
			--kubeconfig "${kubeconfig}" --wait "${timeout}"
	fi
	kubectl_ wait --for=condition=Ready nodes --all --timeout="${timeout}"
	kubectl_ get nodes -o wide
}

install_kiln() {
	local tag image
	tag="$(git -C "${root}" describe --tags --always --dirty)"
	for image in kiln-operator kiln-apiserver kiln jobset kueue torch-cpu; do
		log "kind load image-archive bin/images/${image}.tar"
		kind load image-archive "${bin}/images/${image}.tar" --name "${cluster}"
	done
	log "installing the chart in ${namespace}"
	helm_ upgrade --install kiln "${root}/charts/kiln" --namespace "${namespace}" --create-namespace \
		--values "${here}/local-values.yaml" --set operator.image.tag="${tag}" --set apiserver.image.tag="${tag}" \
		--set tests.image.tag="${tag}" --wait --timeout "${timeout}"
	# `helm --wait` returns once the Deployments are available, which can be before JobSet's
	# webhook serves the certificate its configuration names (its cert rotator restarts the
	# controller until the two agree); Kiln's operator would retry, helm test's timeout runs.
	log "waiting for JobSet's webhook to accept a JobSet (a server-side dry run)"
	local deadline=$((SECONDS + 180))
	until kubectl_ create --dry-run=server -o name -f - >/dev/null 2>"${state}/jobset-webhook.err" <<-EOF; do
		apiVersion: jobset.x-k8s.io/v1alpha2
		kind: JobSet
		metadata: {name: kiln-kind-webhook-check, namespace: default}
		spec:
		  replicatedJobs:
		    - name: node
		      template:
		        spec:
		          template:
		            spec:
		              restartPolicy: Never
		              containers: [{name: node, image: kiln.local/torch-cpu:1.13}]
	EOF
		((SECONDS < deadline)) || fail "JobSet's webhook refuses JobSets after 3 minutes: $(cat "${state}/jobset-webhook.err")"
		sleep 2
	done
	log "helm test: a TrainJob submitted through Kiln's API server"
	helm_ test kiln --namespace "${namespace}" --timeout "${timeout}"
}

conformance() {
	local user=kiln-conformance port=18290 pid
	log "a user for the API server's checks: ServiceAccount default/${user}, bound to kiln-user"
	kubectl_ create serviceaccount "${user}" -n default --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
	kubectl_ create rolebinding "${user}" --clusterrole=kiln-user --serviceaccount="default:${user}" -n default \
		--dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
	kubectl_ create token "${user}" -n default --duration=2h >"${state}/token"
	kubectl_ port-forward -n "${namespace}" svc/kiln-apiserver "${port}:http" --address 127.0.0.1 >"${state}/port-forward.log" 2>&1 &
	pid=$!
	for _ in $(seq 30); do (echo >"/dev/tcp/127.0.0.1/${port}") 2>/dev/null && break; sleep 1; done
	rm -f "${state}/kiln-config.yaml"
	KILN_CONFIG="${state}/kiln-config.yaml" "${bin}/kiln" config set-context kind --server "http://127.0.0.1:${port}" \
		--token-file "${state}/token" --namespace default --use >/dev/null
	log "bin/kiln-conformance against the kind cluster"
	local rc=0
	# shellcheck disable=SC2086 # extra arguments, as words
	KUBECONFIG="${kubeconfig}" KILN_CONFIG="${state}/kiln-config.yaml" KILN_CONFORMANCE_IMAGE=kiln.local/torch-cpu:1.13 \
		"${bin}/kiln-conformance" -ginkgo.no-color ${KILN_CONFORMANCE_ARGS:-} || rc=$?
	kill "${pid}" 2>/dev/null || true
	return "${rc}"
}

down() {
	if docker info >/dev/null 2>&1; then
		if kind get clusters 2>/dev/null | grep -qx "${cluster}"; then
			log "kind delete cluster ${cluster}"
			kind delete cluster --name "${cluster}" --kubeconfig "${kubeconfig}"
		fi
		docker network rm kind >/dev/null 2>&1 || true
	fi
	if [[ -f "${state}/dockerd.pid" ]]; then
		local pid
		pid="$(cat "${state}/dockerd.pid")"
		if kill "${pid}" 2>/dev/null; then
			log "stopping dockerd (${pid})"
			for _ in $(seq 60); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.5; done
		fi
		rm -f "${state}/dockerd.pid"
	fi
	# What dockerd leaves: its bridges and its iptables chains, and the FORWARD policy.
	local link table chain
	for link in $(ip -o link show type bridge | awk -F': ' '{print $2}' | grep -E '^(docker0|br-[0-9a-f]{12})$' || true); do
		ip link delete "${link}"
	done
	for table in filter nat; do
		for chain in $(iptables -t "${table}" -S | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
			iptables -t "${table}" -S | grep -E -- "-j ${chain}( |$)" | grep -v "^-A ${chain} " | sed 's/^-A/-D/' |
				while read -r rule; do
					# shellcheck disable=SC2086 # a rule is its words
					iptables -t "${table}" ${rule}
				done
		done
		for chain in $(iptables -t "${table}" -S | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
			iptables -t "${table}" -F "${chain}"
		done
		for chain in $(iptables -t "${table}" -S | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
			iptables -t "${table}" -X "${chain}"
		done
	done
	for table in filter nat; do
		iptables -t "${table}" -S | grep -E -- "^-A .*(-s (${docker_bip%.1/24}|${docker_pool%.0.0/16}|${kind_subnet%.0/24})|-[io] (docker0|br-[0-9a-f]{12}) )" |
			sed 's/^-A/-D/' | while read -r rule; do
			# shellcheck disable=SC2086 # a rule is its words
			iptables -t "${table}" ${rule}
		done
	done
	if [[ -f "${state}/forward-policy" ]]; then
		iptables -P FORWARD "$(cat "${state}/forward-policy")"
		rm -f "${state}/forward-policy"
	fi
	log "down: no cluster, no dockerd, no bridge or iptables chain of theirs"
}

case "${1:-all}" in
all)
	if [[ -z "${KILN_KIND_KEEP:-}" ]]; then trap down EXIT; fi
	docker_up
	node_image
	create_cluster
	install_kiln
	conformance
	;;
docker) docker_up ;;
node-image) docker_up && node_image ;;
cluster) create_cluster ;;
kiln) install_kiln ;;
conformance) conformance ;;
down) down ;;
*)
	echo "usage: $0 [all|docker|node-image|cluster|kiln|conformance|down]" >&2
	exit 2
	;;
esac
