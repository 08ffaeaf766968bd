package platform

import (
	"context"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Node labels and taints of the simulated fleet, as the NVIDIA GPU operator and a cloud
// provider's spot node pools set them.
const (
	LabelGPUPresent = "nvidia.com/gpu.present"
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUCount   = "nvidia.com/gpu.count"
	LabelNodePool   = "kiln.dev/node-pool"
	// LabelSpot and TaintSpot are GKE's spot VM label and taint.
	LabelSpot = "cloud.google.com/gke-spot"
	TaintSpot = "cloud.google.com/gke-spot"

	NodePoolGPU  = "gpu"
	NodePoolSpot = "gpu-spot"
	ResourceGPU  = "nvidia.com/gpu"
)

var (
	nodeGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	crdGVR  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// Nodes returns the simulated fleet: GPU nodes, then spot GPU nodes tainted NoSchedule.
func (c Config) Nodes() []*unstructured.Unstructured {
	var nodes []*unstructured.Unstructured
	for i := range c.GPUNodes {
		nodes = append(nodes, c.node(fmt.Sprintf("kwok-gpu-%d", i), NodePoolGPU, false))
	}
	for i := range c.SpotNodes {
		nodes = append(nodes, c.node(fmt.Sprintf("kwok-spot-%d", i), NodePoolSpot, true))
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
			"annotations": map[string]any{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		"spec":   spec,
		"status": map[string]any{"capacity": resources, "allocatable": resources},
	}}
}

func (p *Platform) applyNodes(ctx context.Context, cs *clientSet) error {
	nodes := p.Nodes()
	for _, n := range nodes {
		if err := cs.apply(ctx, n); err != nil {
			return err
		}
		// Capacity lives in status, which apply to the main resource ignores.
		if _, err := cs.dyn.Resource(nodeGVR).ApplyStatus(ctx, n.GetName(), n, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("setting capacity of node %s: %w", n.GetName(), err)
		}
	}
	p.logf("nodes: %d GPU nodes and %d spot nodes (%s CPU, %s memory, %d GPUs each)", p.GPUNodes, p.SpotNodes, p.NodeCPU, p.NodeMemory, p.GPUsPerNode)
	return nil
}

func (p *Platform) waitNodesReady(ctx context.Context, cs *clientSet) error {
	want := p.GPUNodes + p.SpotNodes
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, p.ComponentTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.dyn.Resource(nodeGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range list.Items {
			if conditionTrue(&list.Items[i], "Ready") {
				ready++
			}
		}
		return ready >= want, nil
	})
}
