// Package realnode runs the local platform's real node, kiln-node-0, on this machine: a
// kubelet, containerd and runc, the bridge CNI, kube-proxy, CoreDNS and the local-path
// provisioner (the default StorageClass), each a process started from bin/, and undoes everything it changed on the host when it stops
// (iptables, cgroups, mounts, sysctls; realnode_host.go).
package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kiln-ml/kiln/build/images"
	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
	"github.com/kiln-ml/kiln/e2e/internal/platform/manifests"
	"github.com/kiln-ml/kiln/e2e/internal/platform/process"
)

// The real node: a kubelet registering kiln-node-0 with this machine's CPUs and memory,
// containerd and runc running its pods, the bridge CNI, kube-proxy for Services and CoreDNS
// for cluster DNS, each a process the platform starts from bin/. KWOK manages only its own
// (annotated) nodes, so it never touches this one or its pods.

// NodeImages are the images imported into the node's containerd: the sandbox image, and
// kiln.local/torch-cpu (Debian's python3-torch) for real training.
var NodeImages = []string{"pause", "torch-cpu"}

// Processes are the node's components, in the order they start.
func (n Node) Processes() []process.Process {
	cfg := n.ConfigDir
	proc := func(name, bin string, args ...string) process.Process {
		return process.Process{Name: name, Path: n.Bin(bin), Args: args, RunDir: n.RunDir, LogsDir: n.LogsDir}
	}
	containerd := proc("containerd", "containerd", "--config="+filepath.Join(cfg, "containerd.toml"))
	// containerd finds its shim, containerd-shim-runc-v2, on PATH.
	containerd.Env = []string{"PATH=" + n.BinDir + string(os.PathListSeparator) + os.Getenv("PATH")}
	procs := []process.Process{
		proc("apiserver-forward", "kiln-platform", "forward",
			fmt.Sprintf("--listen=%s:%d", NodeIP, n.APIServerPort), fmt.Sprintf("--to=127.0.0.1:%d", n.APIServerPort)),
	}
	for _, port := range n.ForwardPorts {
		procs = append(procs, proc(fmt.Sprintf("forward-%d", port), "kiln-platform", "forward",
			fmt.Sprintf("--listen=%s:%d", NodeIP, port), fmt.Sprintf("--to=127.0.0.1:%d", port)))
	}
	return append(procs,
		containerd,
		proc("coredns", "coredns", "-conf="+filepath.Join(cfg, "Corefile")),
		proc("kube-proxy", "kube-proxy", "--config="+filepath.Join(cfg, "kube-proxy.yaml")),
		proc("local-path-provisioner", "local-path-provisioner", n.provisionerArgs()...),
		proc("kubelet", "kubelet", n.kubeletArgs(filepath.Join(cfg, "kubelet.yaml"), filepath.Join(cfg, "kubelet.kubeconfig"))...),
	)
}

func (n Node) component(name string) process.Process {
	for _, proc := range n.Processes() {
		if proc.Name == name {
			return proc
		}
	}
	panic("no real node process " + name)
}

// Up starts the node, or leaves it running. A node found half running (after a
// crash) is torn down first.
func (n Node) Up(ctx context.Context, cs *cluster.Clients) error {
	procs := n.Processes()
	running := 0
	for _, proc := range procs {
		if _, ok := proc.Running(); ok {
			running++
		}
	}
	if running == len(procs) {
		n.logf("real node %s: already running", Name)
		return nil
	}
	if err := n.Down(ctx); err != nil {
		return fmt.Errorf("cleaning up after the real node's last run: %w", err)
	}
	start := time.Now()
	if err := n.recordHostState(); err != nil {
		return err
	}
	for _, d := range []string{n.Dir(), n.RuntimeDir(), n.cniConfDir(), n.podLogsDir(), n.VolumesDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := bridgeUp(); err != nil {
		return err
	}
	if err := n.setSysctls(); err != nil {
		return err
	}
	if err := n.ensureCgroupRoot(); err != nil {
		return err
	}
	sandbox, err := ArchiveRef(filepath.Join(n.BinDir, "images", "pause.tar"))
	if err != nil {
		return err
	}
	torch, err := ArchiveRef(filepath.Join(n.BinDir, "images", "torch-cpu.tar"))
	if err != nil {
		return err
	}
	if err := n.writeConfigs(ctx, cs, sandbox, torch); err != nil {
		return err
	}
	for _, proc := range procs {
		if err := proc.Start(); err != nil {
			return err
		}
		if proc.Name == "containerd" {
			if err := n.waitContainerd(ctx); err != nil {
				return err
			}
			if err := n.importNodeImages(ctx); err != nil {
				return err
			}
		}
	}
	if err := n.waitReady(ctx, cs); err != nil {
		return err
	}
	n.logf("real node %s: Ready in %s (kubelet, containerd, kube-proxy, CoreDNS, local-path provisioner; pods in %s, Services in %s; volumes of StorageClass %s in %s; logs in %s)",
		Name, time.Since(start).Round(100*time.Millisecond), NodePodCIDR, ServiceCIDR, StorageClass, n.VolumesDir(), n.LogsDir)
	return nil
}

// writeConfigs writes each component's configuration and kubeconfig, and applies
// the cluster objects they need: CoreDNS's RBAC and the kube-dns Service, the local-path
// provisioner's RBAC, configuration and StorageClass (its helper pods run torchImage).
func (n Node) writeConfigs(ctx context.Context, cs *cluster.Clients, sandboxImage, torchImage string) error {
	cfg := n.ConfigDir
	kubeconfigs := map[string][]string{
		"kubelet.kubeconfig":    {"system:node:" + Name, "system:nodes"},
		"kube-proxy.kubeconfig": {"system:kube-proxy", "system:authenticated"},
		"coredns.kubeconfig":    {"system:coredns", "system:authenticated"},
		"local-path.kubeconfig": {storageUser, "system:authenticated"},
	}
	for file, id := range kubeconfigs {
		out, err := n.IssueKubeconfig(ctx, id[0], id[1])
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cfg, file), out, 0o600); err != nil {
			return err
		}
	}
	kubelet, err := n.kubeletConfig(filepath.Join(n.ClusterDir, "pki", "ca.crt"))
	if err != nil {
		return err
	}
	proxy, err := n.kubeProxyConfig(filepath.Join(cfg, "kube-proxy.kubeconfig"))
	if err != nil {
		return err
	}
	cni, err := n.cniConfig()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		filepath.Join(cfg, "containerd.toml"):             []byte(n.containerdConfig(sandboxImage)),
		filepath.Join(cfg, "kubelet.yaml"):                kubelet,
		filepath.Join(cfg, "kube-proxy.yaml"):             proxy,
		filepath.Join(cfg, "Corefile"):                    []byte(n.corefile(filepath.Join(cfg, "coredns.kubeconfig"))),
		filepath.Join(n.cniConfDir(), "10-kiln.conflist"): cni,
	}
	if n.Registry != "" {
		files[filepath.Join(n.registryHostsDir(), n.Registry, "hosts.toml")] = []byte(n.registryHosts())
	}
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	storage, err := n.storageObjects(torchImage)
	if err != nil {
		return err
	}
	return cs.Apply(ctx, append(clusterDNSObjects(), storage...)...)
}

// clusterDNSObjects are CoreDNS's permissions (as kubeadm grants them) and the kube-dns
// Service at ClusterDNSIP, whose one endpoint is CoreDNS on the node's address.
func clusterDNSObjects() []*unstructured.Unstructured {
	role := manifests.Object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "system:coredns", map[string]any{
		"rules": []any{
			map[string]any{"apiGroups": []any{""}, "resources": []any{"endpoints", "services", "pods", "namespaces"}, "verbs": []any{"list", "watch"}},
			map[string]any{"apiGroups": []any{"discovery.k8s.io"}, "resources": []any{"endpointslices"}, "verbs": []any{"list", "watch"}},
		},
	})
	binding := manifests.Object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "system:coredns", map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:coredns"}},
	})
	ports := []any{
		map[string]any{"name": "dns", "port": int64(53), "protocol": "UDP"},
		map[string]any{"name": "dns-tcp", "port": int64(53), "protocol": "TCP"},
	}
	svc := manifests.Object("v1", "Service", "kube-system", "kube-dns", map[string]any{
		"spec": map[string]any{"clusterIP": ClusterDNSIP, "ports": ports},
	})
	svc.SetLabels(map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"})
	slice := manifests.Object("discovery.k8s.io/v1", "EndpointSlice", "kube-system", "kube-dns-"+Name, map[string]any{
		"addressType": "IPv4",
		"endpoints":   []any{map[string]any{"addresses": []any{NodeIP}, "conditions": map[string]any{"ready": true}, "nodeName": Name}},
		"ports":       ports,
	})
	slice.SetLabels(map[string]string{"kubernetes.io/service-name": "kube-dns", "endpointslice.kubernetes.io/managed-by": cluster.FieldManager})
	return []*unstructured.Unstructured{role, binding, svc, slice}
}

// ArchiveRef is the image name an OCI archive of `make images` carries.
func ArchiveRef(file string) (string, error) {
	ref, err := images.ArchiveRef(file)
	if err != nil {
		return "", fmt.Errorf("%w (run `make node-images`)", err)
	}
	return ref, nil
}

func (n Node) ctr(ctx context.Context, args ...string) ([]byte, error) {
	args = append([]string{"--address", n.ContainerdSocket(), "--namespace", ContainerdNamespace}, args...)
	out, err := exec.CommandContext(ctx, n.Bin("ctr"), args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// ImportImage imports an image archive into containerd's k8s.io namespace; content
// already there is not written again.
func (n Node) ImportImage(ctx context.Context, archive string) error {
	_, err := n.ctr(ctx, "images", "import", "--local", archive)
	return err
}

func (n Node) waitContainerd(ctx context.Context) error {
	proc := n.component("containerd")
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, n.Timeout, true, func(ctx context.Context) (bool, error) {
		if _, ok := proc.Running(); !ok {
			return false, fmt.Errorf("containerd exited:\n%s", process.Tail(proc.LogFile(), 20))
		}
		_, err := n.ctr(ctx, "version")
		return err == nil, nil
	})
}

// importNodeImages imports NodeImages into containerd's k8s.io namespace; content already
// there is not written again.
func (n Node) importNodeImages(ctx context.Context) error {
	for _, name := range NodeImages {
		file := filepath.Join(n.BinDir, "images", name+".tar")
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("image %s: %w (run `make node-images`)", name, err)
		}
		start := time.Now()
		if err := n.ImportImage(ctx, file); err != nil {
			return err
		}
		n.logf("real node %s: imported %s in %s", Name, file, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

func (n Node) waitReady(ctx context.Context, cs *cluster.Clients) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, n.Timeout, true, func(ctx context.Context) (bool, error) {
		for _, proc := range n.Processes() {
			if _, ok := proc.Running(); !ok {
				return false, fmt.Errorf("%s exited:\n--- %s (last 20 lines)\n%s", proc.Name, proc.LogFile(), process.Tail(proc.LogFile(), 20))
			}
		}
		node, err := cs.Dyn.Resource(cluster.NodeGVR).Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return cluster.ConditionTrue(node, "Ready"), nil
	})
}

// Down stops the node and undoes everything it did to this machine, whether it
// runs, was stopped or was killed half way: pods' sandboxes are stopped and removed through
// the CRI (containers killed, networks torn down), the components stopped, anything left
// killed and unmounted, iptables chains, cgroups, the bridge and the sysctls put back.
func (n Node) Down(ctx context.Context) error {
	var errs []error
	procs := n.Processes()
	stop := func(name string) {
		for _, proc := range procs {
			if proc.Name == name {
				errs = append(errs, proc.StopReporting(n.Out))
			}
		}
	}
	// The provisioner first: it would start helper pods on a node going away.
	stop("local-path-provisioner")
	stop("kubelet")
	if _, running := n.component("containerd").Running(); running {
		if err := n.removeSandboxes(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	stop("containerd")
	stop("kube-proxy")
	stop("coredns")
	stop("apiserver-forward")
	for _, port := range n.ForwardPorts {
		stop(fmt.Sprintf("forward-%d", port))
	}
	if err := n.removeCgroups(30 * time.Second); err != nil {
		errs = append(errs, err)
	}
	// containerd's shims outlive it; with their containers gone they have nothing to do.
	for _, pid := range processesRunning(n.Bin("containerd-shim-runc-v2")) {
		_ = killWait(pid, 5*time.Second)
	}
	unmounted := n.unmountAll()
	errs = append(errs, unmounted)
	if _, err := os.Stat(n.Bin("kube-proxy")); err == nil && len(iptablesLeftovers()) > 0 {
		if out, err := exec.CommandContext(ctx, n.Bin("kube-proxy"), "--cleanup").CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %w: %s", err, strings.TrimSpace(string(out))))
		}
	}
	errs = append(errs, removeIPTablesChains(), bridgeDown())
	for _, l := range n.containerLogLinks() {
		errs = append(errs, os.Remove(l))
	}
	if unmounted == nil {
		// Runtime state only; images and snapshots stay in Dir for the next run.
		errs = append(errs, os.RemoveAll(n.RuntimeDir()), os.RemoveAll(n.kubeletRootDir()), os.RemoveAll(n.cniIPAMDir()))
		errs = append(errs, n.restoreHostState())
	}
	return errors.Join(errs...)
}

// removeSandboxes stops and removes every pod sandbox through the CRI, as the kubelet would:
// containerd kills the containers, runs the CNI DEL (veth, IP) and removes the netns.
func (n Node) removeSandboxes(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+n.ContainerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox of pod %s/%s: %w", sb.Metadata.Namespace, sb.Metadata.Name, err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox of pod %s/%s: %w", sb.Metadata.Namespace, sb.Metadata.Name, err))
		}
	}
	if len(list.Items) > 0 {
		n.logf("real node %s: removed %d pod sandboxes", Name, len(list.Items))
	}
	return errors.Join(errs...)
}

// Leftovers lists what the real node left on this machine: processes, mounts,
// cgroups, the bridge and its veths, network namespaces, iptables rules, changed sysctls,
// files in fixed host paths. Empty after `down`.
func (n Node) Leftovers() []string {
	var left []string
	for _, proc := range n.Processes() {
		if pids := processesRunning(proc.Path); len(pids) > 0 && !strings.Contains(proc.Name, "forward") {
			left = append(left, fmt.Sprintf("process %s: pids %v", proc.Path, pids))
		}
		if pid, ok := proc.Running(); ok {
			left = append(left, fmt.Sprintf("process %s: pid %d", proc.Name, pid))
		}
	}
	if pids := processesRunning(n.Bin("containerd-shim-runc-v2")); len(pids) > 0 {
		left = append(left, fmt.Sprintf("containerd shims: pids %v", pids))
	}
	for _, m := range n.nodeMounts() {
		left = append(left, "mount "+m)
	}
	for _, d := range n.cgroupDirs() {
		left = append(left, "cgroup "+d)
	}
	if _, err := os.Stat("/sys/class/net/" + BridgeName); err == nil {
		left = append(left, "bridge "+BridgeName)
	}
	if links, _ := filepath.Glob("/sys/class/net/veth*"); len(links) > 0 {
		for _, l := range links {
			left = append(left, "veth "+filepath.Base(l))
		}
	}
	if ns, _ := filepath.Glob("/run/netns/cni-*"); len(ns) > 0 {
		left = append(left, "network namespaces "+strings.Join(ns, " "))
	}
	left = append(left, iptablesLeftovers()...)
	for _, t := range n.nftTablesAdded() {
		left = append(left, "nftables table "+t)
	}
	if _, err := os.Stat(n.hostStateFile()); err == nil {
		left = append(left, "sysctls and host paths not restored ("+n.hostStateFile()+")")
	}
	for _, l := range n.containerLogLinks() {
		left = append(left, "log link "+l)
	}
	if _, err := os.Stat(n.RuntimeDir()); err == nil {
		left = append(left, "directory "+n.RuntimeDir())
	}
	return left
}

// killWait SIGKILLs pid and waits until it is gone.
func killWait(pid int, timeout time.Duration) error {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return syscall.Kill(pid, 0) != nil, nil
	})
}
