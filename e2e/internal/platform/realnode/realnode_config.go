package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfig "k8s.io/component-base/config/v1alpha1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The real node's identity: its name, and the pool that labels it and taints it.
const (
	Name = "kiln-node-0"
	// LabelNodePool labels every node of the platform, KWOK's and this one, with its pool.
	LabelNodePool = "kiln.dev/node-pool"
	// NodePool labels the real node, and is the value of its NoSchedule taint
	// (Taint): only pods that tolerate it land there.
	NodePool = "real"
	Taint    = LabelNodePool
)

// The real node's network: one bridge on this machine whose host address is the node's
// IP, pods in its /24, Services in 100.96.0.0/16. All of it inside 100.64.0.0/10 (shared
// address space, never routed here), outside 10/8, 172.16/12 and 192.168/16.
const (
	// SharedAddressSpace is 100.64.0.0/10 (RFC 6598), where everything below lives.
	SharedAddressSpace = "100.64.0.0/10"

	BridgeName     = "kiln0"
	NodeIP         = "100.64.1.1"
	NodePodCIDR    = "100.64.1.0/24"
	ClusterPodCIDR = "100.64.0.0/16"
	ServiceCIDR    = "100.96.0.0/16"
	// KubernetesServiceIP is the `kubernetes` Service's ClusterIP (the first of ServiceCIDR).
	KubernetesServiceIP = "100.96.0.1"
	// ClusterDNSIP is the kube-dns Service, backed by CoreDNS on NodeIP:53.
	ClusterDNSIP  = "100.96.0.10"
	ClusterDomain = "cluster.local"
	// ContainerdNamespace is the namespace the CRI keeps Kubernetes' images and containers in.
	ContainerdNamespace = "k8s.io"
)

// Node is the real node of one local platform: where its binaries and state live, the
// cluster it joins, and where it says what it does.
type Node struct {
	// BinDir holds the node's binaries: kubelet, containerd and its shim, runc, ctr,
	// kube-proxy, CoreDNS, the CNI plugins (in cni/), and kiln-platform (its forward).
	BinDir string
	// StateDir is the platform's state directory; the node's is Dir, below it.
	StateDir string
	// ConfigDir holds the components' generated configuration and kubeconfigs.
	ConfigDir string
	// RunDir and LogsDir hold the components' PID files and logs.
	RunDir, LogsDir string
	// ClusterName names the cluster, and the node's runtime directory and cgroup.
	ClusterName string
	// ClusterDir is kwokctl's directory of the cluster: its CA is in pki/ca.crt.
	ClusterDir string
	// APIServerPort is where the apiserver listens on 127.0.0.1.
	APIServerPort int
	// ForwardPorts are more ports of 127.0.0.1 that the node's pods reach at NodeIP (the
	// operator's status server, when it runs as a process).
	ForwardPorts []int
	// Timeout bounds each wait for a component.
	Timeout time.Duration
	// IssueKubeconfig returns a kubeconfig for a user in a group (kwokctl get kubeconfig).
	IssueKubeconfig func(ctx context.Context, user, group string) ([]byte, error)
	// Registry is the platform's OCI registry (host:port), whose certificate RegistryCA
	// signs: containerd pulls from it over HTTPS, trusting that CA for it alone.
	Registry, RegistryCA string

	Out io.Writer
}

func (n Node) logf(format string, args ...any) {
	fmt.Fprintf(n.Out, format+"\n", args...)
}

// Bin is the path of one of the node's binaries.
func (n Node) Bin(name string) string { return filepath.Join(n.BinDir, name) }

// Dir holds the real node's persistent state: containerd's content and snapshots,
// the kubelet's root directory, pod logs, the CNI configuration and IP allocations.
func (n Node) Dir() string { return filepath.Join(n.StateDir, "node") }

// RuntimeDir is the real node's runtime state on tmpfs, as /run/containerd would be:
// containerd's state, runc's, the shims' sockets (a Unix socket path is limited to 107
// bytes, and a shim's name alone is 64) and the pods' network namespaces.
func (n Node) RuntimeDir() string { return filepath.Join("/run/kiln", n.ClusterName) }

// ContainerdSocket is containerd's gRPC socket, the kubelet's CRI endpoint.
func (n Node) ContainerdSocket() string {
	return filepath.Join(n.RuntimeDir(), "containerd.sock")
}

// CgroupRoot is the cgroup (in every v1 hierarchy) under which the kubelet makes kubepods.
func (n Node) CgroupRoot() string { return "/kiln-" + n.ClusterName }

func (n Node) kubeletRootDir() string   { return filepath.Join(n.Dir(), "kubelet") }
func (n Node) podLogsDir() string       { return filepath.Join(n.Dir(), "pod-logs") }
func (n Node) cniConfDir() string       { return filepath.Join(n.Dir(), "cni", "net.d") }
func (n Node) cniIPAMDir() string       { return filepath.Join(n.Dir(), "cni", "networks") }
func (n Node) containerdRoot() string   { return filepath.Join(n.Dir(), "containerd") }
func (n Node) containerdState() string  { return filepath.Join(n.RuntimeDir(), "containerd") }
func (n Node) registryHostsDir() string { return filepath.Join(n.ConfigDir, "certs.d") }

// registryHosts is containerd's hosts.toml for the platform's registry: HTTPS, its CA.
func (n Node) registryHosts() string {
	return strings.Join([]string{
		fmt.Sprintf("server = %q", "https://"+n.Registry),
		fmt.Sprintf("[host.%q]", "https://"+n.Registry),
		`  capabilities = ["pull", "resolve"]`,
		fmt.Sprintf("  ca = %q", n.RegistryCA),
		``,
	}, "\n")
}

// containerdConfig is containerd v2's configuration: everything under the platform's own
// directories, only the plugins a CRI node needs, runc from bin/, the CNI plugins from
// bin/cni. restrict_oom_score_adj because this machine's root lacks CAP_SYS_RESOURCE: runc
// cannot lower a container's OOM score below its own.
func (n Node) containerdConfig(sandboxImage string) string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	return strings.Join([]string{
		`version = 3`,
		`root = ` + q(n.containerdRoot()),
		`state = ` + q(n.containerdState()),
		`imports = []`,
		`disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt", "io.containerd.image-verifier.v1.bindir", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.snapshotter.v1.blockfile", "io.containerd.tracing.processor.v1.otlp"]`,
		`[grpc]`,
		`  address = ` + q(n.ContainerdSocket()),
		`[ttrpc]`,
		`  address = ` + q(n.ContainerdSocket()+".ttrpc"),
		`[plugins."io.containerd.shim.v1.manager"]`,
		`  socket_dir = ` + q(filepath.Join(n.RuntimeDir(), "s")),
		`[plugins."io.containerd.cri.v1.images"]`,
		`  snapshotter = "overlayfs"`,
		`  [plugins."io.containerd.cri.v1.images".registry]`,
		`    config_path = ` + q(n.registryHostsDir()),
		`  [plugins."io.containerd.cri.v1.images".pinned_images]`,
		`    sandbox = ` + q(sandboxImage),
		`[plugins."io.containerd.cri.v1.runtime"]`,
		`  restrict_oom_score_adj = true`,
		`  netns_mounts_under_state_dir = true`,
		`  cdi_spec_dirs = []`,
		`  [plugins."io.containerd.cri.v1.runtime".containerd]`,
		`    default_runtime_name = "runc"`,
		`    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]`,
		`      runtime_type = "io.containerd.runc.v2"`,
		`      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]`,
		`        BinaryName = ` + q(n.Bin("runc")),
		`        Root = ` + q(filepath.Join(n.RuntimeDir(), "runc")),
		`        SystemdCgroup = false`,
		`  [plugins."io.containerd.cri.v1.runtime".cni]`,
		`    bin_dirs = [` + q(filepath.Join(n.BinDir, "cni")) + `]`,
		`    conf_dir = ` + q(n.cniConfDir()),
		`[plugins."io.containerd.grpc.v1.cri"]`,
		`  disable_tcp_service = true`,
		`  stream_server_address = "127.0.0.1"`,
		`  stream_server_port = "0"`,
		``,
	}, "\n")
}

// cniConfig is the pod network: the bridge plugin on BridgeName (the node's address is
// the pods' gateway), host-local IPAM in NodePodCIDR with its allocations in the node's
// directory, hairpin mode so a pod reaches itself through a Service, and portmap for
// hostPorts. Pods get a route to 100.64.0.0/10 (pods, Services, the node) and no default
// route, no masquerade: nothing outside this machine is reachable from a pod.
func (n Node) cniConfig() ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "kiln",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      BridgeName,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  []any{[]any{map[string]any{"subnet": NodePodCIDR, "gateway": NodeIP}}},
					"routes":  []any{map[string]any{"dst": SharedAddressSpace, "gw": NodeIP}},
					"dataDir": n.cniIPAMDir(),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}, "snat": false},
		},
	}, "", "  ")
}

// kubeletConfig is the real node's kubelet: it serves on NodeIP only, authenticates the
// apiserver by the cluster's CA and asks it to authorize every request, keeps everything
// under the node's directories and its pods' cgroups under CgroupRoot, uses cluster DNS
// and none of the host's, never collects the images imported by the platform (nothing can
// be pulled here) and runs on cgroup v1, which this machine mounts.
func (n Node) kubeletConfig(clientCAFile string) ([]byte, error) {
	cfg := kubeletconfig.KubeletConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		Address:            NodeIP,
		Port:               10250,
		ReadOnlyPort:       0,
		HealthzBindAddress: "127.0.0.1",
		HealthzPort:        ptr.To[int32](10248),
		Authentication: kubeletconfig.KubeletAuthentication{
			X509:      kubeletconfig.KubeletX509Authentication{ClientCAFile: clientCAFile},
			Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:               kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeWebhook},
		ContainerRuntimeEndpoint:    "unix://" + n.ContainerdSocket(),
		CgroupDriver:                "cgroupfs",
		CgroupRoot:                  n.CgroupRoot(),
		FailCgroupV1:                ptr.To(false),
		FailSwapOn:                  ptr.To(false),
		PodLogsDir:                  n.podLogsDir(),
		ClusterDNS:                  []string{ClusterDNSIP},
		ClusterDomain:               ClusterDomain,
		ResolverConfig:              ptr.To(""),
		ImageGCHighThresholdPercent: ptr.To[int32](100),
		ImageGCLowThresholdPercent:  ptr.To[int32](99),
		// This machine's disk may be nearly full; pods are evicted only when it is.
		EvictionHard: map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%",
		},
		RegisterWithTaints:        []corev1.Taint{{Key: Taint, Value: NodePool, Effect: corev1.TaintEffectNoSchedule}},
		MaxPods:                   110,
		RotateCertificates:        false,
		ServerTLSBootstrap:        false,
		ShutdownGracePeriod:       metav1.Duration{Duration: 0},
		NodeStatusReportFrequency: metav1.Duration{Duration: time.Minute},
		SyncFrequency:             metav1.Duration{Duration: 10 * time.Second},
	}
	return yaml.Marshal(cfg)
}

// kubeletArgs are the kubelet's flags (what KubeletConfiguration cannot say).
func (n Node) kubeletArgs(configFile, kubeconfig string) []string {
	return []string{
		"--config=" + configFile,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + n.kubeletRootDir(),
		"--hostname-override=" + Name,
		"--node-ip=" + NodeIP,
		"--node-labels=" + strings.Join([]string{
			LabelNodePool + "=" + NodePool,
			"kubernetes.io/hostname=" + Name,
		}, ","),
		"--v=1",
	}
}

// kubeProxyConfig is kube-proxy in iptables mode for ClusterPodCIDR: NodePorts only on
// the pod network, never on localhost (that would set route_localnet), and conntrack
// sysctls left as this machine has them.
func (n Node) kubeProxyConfig(kubeconfig string) ([]byte, error) {
	cfg := kubeproxyconfig.KubeProxyConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: "kubeproxy.config.k8s.io/v1alpha1", Kind: "KubeProxyConfiguration"},
		ClientConnection:   componentbaseconfig.ClientConnectionConfiguration{Kubeconfig: kubeconfig},
		HostnameOverride:   Name,
		BindAddress:        NodeIP,
		HealthzBindAddress: "127.0.0.1:10256",
		MetricsBindAddress: "127.0.0.1:10249",
		Mode:               "iptables",
		ClusterCIDR:        ClusterPodCIDR,
		NodePortAddresses:  []string{NodePodCIDR},
		IPTables: kubeproxyconfig.KubeProxyIPTablesConfiguration{
			LocalhostNodePorts: ptr.To(false),
			MasqueradeAll:      false,
			SyncPeriod:         metav1.Duration{Duration: 30 * time.Second},
		},
		Conntrack: kubeproxyconfig.KubeProxyConntrackConfiguration{
			MaxPerCore:            ptr.To[int32](0),
			Min:                   ptr.To[int32](0),
			TCPEstablishedTimeout: &metav1.Duration{},
			TCPCloseWaitTimeout:   &metav1.Duration{},
		},
	}
	return yaml.Marshal(cfg)
}

// corefile is CoreDNS serving cluster.local on the node's address only; names outside
// the cluster are refused (nothing outside this machine is reachable).
func (n Node) corefile(kubeconfig string) string {
	return fmt.Sprintf(`.:53 {
    bind %s
    errors
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
`, NodeIP, ClusterDomain, kubeconfig)
}
