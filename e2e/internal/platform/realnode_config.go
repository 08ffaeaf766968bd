package platform

import (
	"encoding/json"
	"fmt"
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

// The real node's network: one bridge on this machine whose host address is the node's
// IP, pods in its /24, Services in 100.96.0.0/16. All of it inside 100.64.0.0/10 (shared
// address space, never routed here), outside 10/8, 172.16/12 and 192.168/16.
const (
	RealNodeName = "kiln-node-0"
	// NodePoolReal labels the real node, and is the value of its NoSchedule taint
	// (TaintRealNode): only pods that tolerate it land there.
	NodePoolReal  = "real"
	TaintRealNode = LabelNodePool

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

// RealNodeDir holds the real node's persistent state: containerd's content and snapshots,
// the kubelet's root directory, pod logs, the CNI configuration and IP allocations.
func (c Config) RealNodeDir() string { return filepath.Join(c.StateDir, "node") }

// RealNodeRunDir is the real node's runtime state on tmpfs, as /run/containerd would be:
// containerd's state, runc's, the shims' sockets (a Unix socket path is limited to 107
// bytes, and a shim's name alone is 64) and the pods' network namespaces.
func (c Config) RealNodeRunDir() string { return filepath.Join("/run/kiln", c.ClusterName) }

// ContainerdSocket is containerd's gRPC socket, the kubelet's CRI endpoint.
func (c Config) ContainerdSocket() string {
	return filepath.Join(c.RealNodeRunDir(), "containerd.sock")
}

// CgroupRoot is the cgroup (in every v1 hierarchy) under which the kubelet makes kubepods.
func (c Config) CgroupRoot() string { return "/kiln-" + c.ClusterName }

func (c Config) kubeletRootDir() string  { return filepath.Join(c.RealNodeDir(), "kubelet") }
func (c Config) podLogsDir() string      { return filepath.Join(c.RealNodeDir(), "pod-logs") }
func (c Config) cniConfDir() string      { return filepath.Join(c.RealNodeDir(), "cni", "net.d") }
func (c Config) cniIPAMDir() string      { return filepath.Join(c.RealNodeDir(), "cni", "networks") }
func (c Config) containerdRoot() string  { return filepath.Join(c.RealNodeDir(), "containerd") }
func (c Config) containerdState() string { return filepath.Join(c.RealNodeRunDir(), "containerd") }

// containerdConfig is containerd v2's configuration: everything under the platform's own
// directories, only the plugins a CRI node needs, runc from bin/, the CNI plugins from
// bin/cni. restrict_oom_score_adj because this machine's root lacks CAP_SYS_RESOURCE: runc
// cannot lower a container's OOM score below its own.
func (c Config) containerdConfig(sandboxImage string) string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	return strings.Join([]string{
		`version = 3`,
		`root = ` + q(c.containerdRoot()),
		`state = ` + q(c.containerdState()),
		`imports = []`,
		`disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt", "io.containerd.image-verifier.v1.bindir", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs", "io.containerd.snapshotter.v1.blockfile", "io.containerd.tracing.processor.v1.otlp"]`,
		`[grpc]`,
		`  address = ` + q(c.ContainerdSocket()),
		`[ttrpc]`,
		`  address = ` + q(c.ContainerdSocket()+".ttrpc"),
		`[plugins."io.containerd.shim.v1.manager"]`,
		`  socket_dir = ` + q(filepath.Join(c.RealNodeRunDir(), "s")),
		`[plugins."io.containerd.cri.v1.images"]`,
		`  snapshotter = "overlayfs"`,
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
		`        BinaryName = ` + q(c.Bin("runc")),
		`        Root = ` + q(filepath.Join(c.RealNodeRunDir(), "runc")),
		`        SystemdCgroup = false`,
		`  [plugins."io.containerd.cri.v1.runtime".cni]`,
		`    bin_dirs = [` + q(filepath.Join(c.BinDir, "cni")) + `]`,
		`    conf_dir = ` + q(c.cniConfDir()),
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
func (c Config) cniConfig() ([]byte, error) {
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
					"dataDir": c.cniIPAMDir(),
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
func (c Config) kubeletConfig(clientCAFile string) ([]byte, error) {
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
		ContainerRuntimeEndpoint:    "unix://" + c.ContainerdSocket(),
		CgroupDriver:                "cgroupfs",
		CgroupRoot:                  c.CgroupRoot(),
		FailCgroupV1:                ptr.To(false),
		FailSwapOn:                  ptr.To(false),
		PodLogsDir:                  c.podLogsDir(),
		ClusterDNS:                  []string{ClusterDNSIP},
		ClusterDomain:               ClusterDomain,
		ResolverConfig:              ptr.To(""),
		ImageGCHighThresholdPercent: ptr.To[int32](100),
		ImageGCLowThresholdPercent:  ptr.To[int32](99),
		// This machine's disk may be nearly full; pods are evicted only when it is.
		EvictionHard: map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%",
		},
		RegisterWithTaints:        []corev1.Taint{{Key: TaintRealNode, Value: NodePoolReal, Effect: corev1.TaintEffectNoSchedule}},
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
func (c Config) kubeletArgs(configFile, kubeconfig string) []string {
	return []string{
		"--config=" + configFile,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + c.kubeletRootDir(),
		"--hostname-override=" + RealNodeName,
		"--node-ip=" + NodeIP,
		"--node-labels=" + strings.Join([]string{
			LabelNodePool + "=" + NodePoolReal,
			"kubernetes.io/hostname=" + RealNodeName,
		}, ","),
		"--v=1",
	}
}

// kubeProxyConfig is kube-proxy in iptables mode for ClusterPodCIDR: NodePorts only on
// the pod network, never on localhost (that would set route_localnet), and conntrack
// sysctls left as this machine has them.
func (c Config) kubeProxyConfig(kubeconfig string) ([]byte, error) {
	cfg := kubeproxyconfig.KubeProxyConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: "kubeproxy.config.k8s.io/v1alpha1", Kind: "KubeProxyConfiguration"},
		ClientConnection:   componentbaseconfig.ClientConnectionConfiguration{Kubeconfig: kubeconfig},
		HostnameOverride:   RealNodeName,
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
func (c Config) corefile(kubeconfig string) string {
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
