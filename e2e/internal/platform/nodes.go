package platform

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
	"github.com/kiln-ml/kiln/e2e/internal/platform/realnode"
)

// Node labels and taints of the simulated fleet, as the NVIDIA GPU operator and a cloud
// provider's spot node pools set them.
const (
	LabelGPUPresent = "nvidia.com/gpu.present"
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUCount   = "nvidia.com/gpu.count"
	LabelNodePool   = realnode.LabelNodePool
	// LabelSpot and TaintSpot are GKE's spot VM label and taint.
	LabelSpot = "cloud.google.com/gke-spot"
	TaintSpot = "cloud.google.com/gke-spot"

	NodePoolGPU  = "gpu"
	NodePoolSpot = "gpu-spot"
	// NodePoolTAS is the topology-aware pool, tainted kiln.dev/node-pool=gpu-tas:NoSchedule:
	// only pods Kueue places there through its flavor (which tolerates it) land on it.
	NodePoolTAS = "gpu-tas"
	ResourceGPU = "nvidia.com/gpu"

	// The topology of the TAS pool, labelled as GKE labels its nodes: a block holds racks
	// (GKE's sub-blocks), a rack holds hosts.
	LabelTopologyBlock = "cloud.google.com/gce-topology-block"
	LabelTopologyRack  = "cloud.google.com/gce-topology-subblock"
	LabelHostname      = "kubernetes.io/hostname"
)

// TASNodes is how many nodes the topology-aware pool has.
func (c Config) TASNodes() int { return c.TASBlocks * c.TASRacksPerBlock * c.TASNodesPerRack }

// Nodes returns the simulated fleet: GPU nodes, then spot GPU nodes tainted NoSchedule.
func (c Config) Nodes() []*unstructured.Unstructured {
	var nodes []*unstructured.Unstructured
	for i := range c.GPUNodes {
		nodes = append(nodes, c.node(fmt.Sprintf("kwok-gpu-%d", i), NodePoolGPU, false))
	}
	for i := range c.SpotNodes {
		nodes = append(nodes, c.node(fmt.Sprintf("kwok-spot-%d", i), NodePoolSpot, true))
	}
	for b := range c.TASBlocks {
		for r := range c.TASRacksPerBlock {
			for n := range c.TASNodesPerRack {
				node := c.node(fmt.Sprintf("kwok-tas-b%d-r%d-%d", b, r, n), NodePoolTAS, false)
				labels := node.Object["metadata"].(map[string]any)["labels"].(map[string]any)
				labels[LabelTopologyBlock] = fmt.Sprintf("block-%d", b)
				labels[LabelTopologyRack] = fmt.Sprintf("block-%d-rack-%d", b, r)
				node.Object["spec"] = map[string]any{"taints": []any{map[string]any{"key": LabelNodePool, "value": NodePoolTAS, "effect": "NoSchedule"}}}
				nodes = append(nodes, node)
			}
		}
	}
	return nodes
}

func (c Config) node(name, pool string, spot bool) *unstructured.Unstructured {
	gpus := strconv.Itoa(c.GPUsPerNode)
	labels := map[string]any{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
		LabelNodePool:            pool,
		LabelGPUPresent:          "true",
		LabelGPUProduct:          c.GPUProduct,
		LabelGPUCount:            gpus,
	}
	spec := map[string]any{}
	if spot {
		labels[LabelSpot] = "true"
		spec["taints"] = []any{map[string]any{"key": TaintSpot, "value": "true", "effect": "NoSchedule"}}
	}
	resources := map[string]any{"cpu": c.NodeCPU, "memory": c.NodeMemory, "pods": strconv.Itoa(c.PodsPerNode), ResourceGPU: gpus}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Node",
		"metadata": map[string]any{
			"name":        name,
			"labels":      labels,
			"annotations": map[string]any{kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		"spec":   spec,
		"status": map[string]any{"capacity": resources, "allocatable": resources},
	}}
}

func (p *Platform) applyNodes(ctx context.Context, cs *cluster.Clients) error {
	nodes := p.Nodes()
	for _, n := range nodes {
		if err := cs.Apply(ctx, n); err != nil {
			return err
		}
		// Capacity lives in status, which apply to the main resource ignores.
		if _, err := cs.Dyn.Resource(cluster.NodeGVR).ApplyStatus(ctx, n.GetName(), n, metav1.ApplyOptions{FieldManager: cluster.FieldManager, Force: true}); err != nil {
			return fmt.Errorf("setting capacity of node %s: %w", n.GetName(), err)
		}
	}
	p.logf("nodes: %d GPU nodes, %d spot nodes and a topology-aware pool of %d blocks × %d racks × %d nodes (%s CPU, %s memory, %d GPUs each)",
		p.GPUNodes, p.SpotNodes, p.TASBlocks, p.TASRacksPerBlock, p.TASNodesPerRack, p.NodeCPU, p.NodeMemory, p.GPUsPerNode)
	return nil
}

func (p *Platform) waitNodesReady(ctx context.Context, cs *cluster.Clients) error {
	want := p.GPUNodes + p.SpotNodes + p.TASNodes()
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, p.ComponentTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.Dyn.Resource(cluster.NodeGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range list.Items {
			if cluster.ConditionTrue(&list.Items[i], "Ready") {
				ready++
			}
		}
		return ready >= want, nil
	})
}

// The real node (package realnode), as the tests and the chart know it.
const (
	RealNodeName = realnode.Name
	// NodePoolReal labels the real node, and is the value of its NoSchedule taint
	// (TaintRealNode): only pods that tolerate it land there.
	NodePoolReal  = realnode.NodePool
	TaintRealNode = realnode.Taint
	// NodeIP is the real node's address, on its bridge; the apiserver is forwarded there.
	NodeIP = realnode.NodeIP
)

// realNode is the real node of this platform, saying what it does on out.
func (c Config) realNode(out io.Writer) realnode.Node {
	return realnode.Node{
		BinDir:          c.BinDir,
		StateDir:        c.StateDir,
		ConfigDir:       c.ConfigDir(),
		RunDir:          c.RunDir(),
		LogsDir:         c.LogsDir(),
		ClusterName:     c.ClusterName,
		ClusterDir:      c.ClusterDir(),
		APIServerPort:   c.APIServerPort,
		ForwardPorts:    forwardedPorts(c),
		Timeout:         c.ComponentTimeout,
		IssueKubeconfig: c.issueKubeconfig,
		Registry:        c.RegistryHost(),
		RegistryCA:      c.PKI().CAFile(),
		Out:             out,
	}
}

// RealNodeLeftovers lists what the real node left on this machine: processes, mounts,
// cgroups, the bridge and its veths, network namespaces, iptables rules, changed sysctls,
// files in fixed host paths. Empty after `down`.
func (p *Platform) RealNodeLeftovers() []string { return p.realNode(p.Out).Leftovers() }

// PodPIDs lists the processes of the real node's pod with this UID, from its cgroup: what
// a test kills to crash the pod's containers as a machine failure would.
func (c Config) PodPIDs(uid string) []int { return c.realNode(io.Discard).PodPIDs(uid) }

// forwardedPorts are the ports of local processes that the real node's pods reach at its
// address: the operator's status server, when the operator runs as a process.
func forwardedPorts(c Config) []int {
	if c.Install == InstallChart || c.OperatorStatus == 0 {
		return nil
	}
	return []int{c.OperatorStatus}
}
