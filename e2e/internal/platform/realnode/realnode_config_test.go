package realnode

import (
	"encoding/json"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// testNode is the real node of the platform's default configuration (platform.DefaultConfig)
// for a repository at root.
func testNode(root string) Node {
	bin := filepath.Join(root, "bin")
	state := filepath.Join(bin, "platform")
	return Node{
		BinDir:        bin,
		StateDir:      state,
		ConfigDir:     filepath.Join(state, "config"),
		RunDir:        filepath.Join(state, "run"),
		LogsDir:       filepath.Join(state, "logs"),
		ClusterName:   "kiln",
		ClusterDir:    filepath.Join(state, "kwok", "clusters", "kiln"),
		APIServerPort: 16443,
		Timeout:       90 * time.Second,
	}
}

// Every address of the real node's network is in 100.64.0.0/10 and in none of the ranges
// this machine's other networks may use.
func TestRealNodeNetworkStaysInSharedAddressSpace(t *testing.T) {
	shared := netip.MustParsePrefix(SharedAddressSpace)
	forbidden := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16")}
	for _, p := range []string{NodePodCIDR, ClusterPodCIDR, ServiceCIDR, NodeIP + "/32", KubernetesServiceIP + "/32", ClusterDNSIP + "/32"} {
		prefix := netip.MustParsePrefix(p)
		if !shared.Contains(prefix.Addr()) || prefix.Bits() < shared.Bits() {
			t.Errorf("%s is outside %s", p, shared)
		}
		for _, f := range forbidden {
			if f.Overlaps(prefix) {
				t.Errorf("%s overlaps %s", p, f)
			}
		}
	}
	svc := netip.MustParsePrefix(ServiceCIDR)
	for _, ip := range []string{KubernetesServiceIP, ClusterDNSIP} {
		if !svc.Contains(netip.MustParseAddr(ip)) {
			t.Errorf("Service IP %s is outside %s", ip, ServiceCIDR)
		}
	}
	if !netip.MustParsePrefix(NodePodCIDR).Contains(netip.MustParseAddr(NodeIP)) {
		t.Errorf("the node's address %s, the pods' gateway, is outside their range %s", NodeIP, NodePodCIDR)
	}
}

func TestKubeletConfig(t *testing.T) {
	c := testNode("/repo")
	data, err := c.kubeletConfig("/repo/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	var got kubeletconfig.KubeletConfiguration
	if err := yaml.UnmarshalStrict(data, &got); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if got.FailCgroupV1 == nil || *got.FailCgroupV1 {
		t.Error("failCgroupV1 must be false: kubelet v1.35+ refuses cgroup v1 otherwise")
	}
	if got.Address != NodeIP || got.HealthzBindAddress != "127.0.0.1" || got.ReadOnlyPort != 0 {
		t.Errorf("kubelet serves on %s (healthz %s, read-only port %d); want %s, 127.0.0.1, none", got.Address, got.HealthzBindAddress, got.ReadOnlyPort, NodeIP)
	}
	if *got.Authentication.Anonymous.Enabled || got.Authorization.Mode != kubeletconfig.KubeletAuthorizationModeWebhook {
		t.Error("kubelet must refuse anonymous requests and authorize through the apiserver")
	}
	if len(got.RegisterWithTaints) != 1 || got.RegisterWithTaints[0].Key != Taint || got.RegisterWithTaints[0].Value != NodePool {
		t.Errorf("taints %+v", got.RegisterWithTaints)
	}
	if got.ResolverConfig == nil || *got.ResolverConfig != "" {
		t.Error("pods must not get this machine's resolv.conf")
	}
	for _, dir := range []string{got.PodLogsDir} {
		if !strings.HasPrefix(dir, c.Dir()) {
			t.Errorf("%s is outside the node's directory", dir)
		}
	}
}

func TestKubeProxyConfig(t *testing.T) {
	data, err := testNode("/repo").kubeProxyConfig("/k")
	if err != nil {
		t.Fatal(err)
	}
	var got kubeproxyconfig.KubeProxyConfiguration
	if err := yaml.UnmarshalStrict(data, &got); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if got.IPTables.LocalhostNodePorts == nil || *got.IPTables.LocalhostNodePorts {
		t.Error("localhost NodePorts would set route_localnet")
	}
	if *got.Conntrack.MaxPerCore != 0 {
		t.Error("kube-proxy must leave the conntrack sysctls alone")
	}
	if got.ClusterCIDR != ClusterPodCIDR || got.Mode != "iptables" {
		t.Errorf("cluster CIDR %s, mode %s", got.ClusterCIDR, got.Mode)
	}
}

func TestCNIConfigRoutesOnlyThePlatformNetwork(t *testing.T) {
	data, err := testNode("/repo").cniConfig()
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type   string `json:"type"`
			IPMasq bool   `json:"ipMasq"`
			IPAM   struct {
				Routes []struct{ Dst string } `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	bridge := conf.Plugins[0]
	if bridge.Type != "bridge" || bridge.IPMasq {
		t.Errorf("first plugin %+v: want the bridge, without masquerade", bridge)
	}
	if len(bridge.IPAM.Routes) != 1 || bridge.IPAM.Routes[0].Dst != SharedAddressSpace {
		t.Errorf("routes %+v: want only %s (no default route)", bridge.IPAM.Routes, SharedAddressSpace)
	}
}

// containerd's shims listen on <socket_dir>/<64 hex digits>; a Unix socket path has at
// most 107 bytes, whatever the repository's path.
func TestShimSocketsFitWhereverTheRepositoryIs(t *testing.T) {
	c := testNode("/a/very/long/path/to/where/someone/cloned/the/kiln/repository/for/no/good/reason")
	if n := len(filepath.Join(c.RuntimeDir(), "s")) + 1 + 64; n > 107 {
		t.Errorf("shim socket paths are %d bytes", n)
	}
	if !strings.Contains(c.containerdConfig("kiln.local/pause:x"), `socket_dir = "`+filepath.Join(c.RuntimeDir(), "s")+`"`) {
		t.Error("containerd's shim socket directory is not the node's run directory")
	}
}

// containerd pulls from the platform's registry over HTTPS, trusting the platform's CA for
// that registry alone.
func TestContainerdTrustsThePlatformRegistry(t *testing.T) {
	c := testNode("/repo")
	c.Registry, c.RegistryCA = "127.0.0.1:18500", "/repo/bin/platform/pki/ca.crt"
	if !strings.Contains(c.containerdConfig("kiln.local/pause:x"), `config_path = "`+c.registryHostsDir()+`"`) {
		t.Error("containerd does not read the registries' hosts configuration")
	}
	want := `server = "https://127.0.0.1:18500"
[host."https://127.0.0.1:18500"]
  capabilities = ["pull", "resolve"]
  ca = "/repo/bin/platform/pki/ca.crt"
`
	if got := c.registryHosts(); got != want {
		t.Errorf("hosts.toml:\n%s\nwant:\n%s", got, want)
	}
}

func TestNodeChainRulesAreRecognised(t *testing.T) {
	for line, want := range map[string]bool{
		"-A INPUT -j KUBE-FIREWALL":                            true,
		"-A OUTPUT -m comment --comment kube -j KUBE-SERVICES": true,
		"-A PREROUTING -j CNI-HOSTPORT-DNAT":                   true,
		"-A INPUT -j ACCEPT":                                   false,
		"-A INPUT -m comment --comment KUBE-X -j DROP":         false,
	} {
		if got := jumpsToNodeChain(ruleFields(line)); got != want {
			t.Errorf("%q: jumps to a node chain = %v, want %v", line, got, want)
		}
	}
}

// The rules kube-proxy leaves carry quoted comments; deleting one passes its arguments back
// to iptables, which takes the comment as one argument or refuses the rule.
func TestRuleFieldsKeepQuotedArguments(t *testing.T) {
	for line, want := range map[string][]string{
		`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`: {"-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"},
		`-A INPUT -m comment --comment "say \"hi\" \\ bye" -j KUBE-X`:                      {"-A", "INPUT", "-m", "comment", "--comment", `say "hi" \ bye`, "-j", "KUBE-X"},
		`-A INPUT -m comment --comment "" -j DROP`:                                         {"-A", "INPUT", "-m", "comment", "--comment", "", "-j", "DROP"},
		"-N KUBE-SERVICES":        {"-N", "KUBE-SERVICES"},
		"  -A  INPUT\t-j ACCEPT ": {"-A", "INPUT", "-j", "ACCEPT"},
	} {
		if got := ruleFields(line); !slices.Equal(got, want) {
			t.Errorf("ruleFields(%q) = %q, want %q", line, got, want)
		}
	}
}
