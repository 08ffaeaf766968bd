package platform

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kiln-ml/kiln/api/kueue"
	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
)

// The Kueue objects every local platform has: a flavor per node pool, one ClusterQueue
// whose quota is the fleet's capacity, and the LocalQueue `default` in namespace default;
// for the topology-aware pool, a Topology (block, rack, host), its flavor, the ClusterQueue
// `tas-queue` and the LocalQueue `tas` in namespace default.
const (
	FlavorGPU          = "gpu"
	FlavorSpot         = "gpu-spot"
	FlavorTAS          = "gpu-tas"
	TopologyName       = "default"
	ClusterQueueName   = "cluster-queue"
	TASClusterQueue    = "tas-queue"
	TASLocalQueue      = "tas"
	DefaultLocalQueue  = "default"
	DefaultNamespace   = "default"
	kueueAPIVersion    = "kueue.x-k8s.io/v1beta2"
	queueApplyDeadline = 60 * time.Second
)

// Queues returns the ResourceFlavors, the ClusterQueue and the default LocalQueue.
func (c Config) Queues() ([]*unstructured.Unstructured, error) {
	gpu := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kueueAPIVersion, "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": FlavorGPU},
		"spec":     map[string]any{"nodeLabels": map[string]any{LabelNodePool: NodePoolGPU}},
	}}
	spot := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kueueAPIVersion, "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": FlavorSpot},
		"spec": map[string]any{
			"nodeLabels":  map[string]any{LabelNodePool: NodePoolSpot},
			"nodeTaints":  []any{map[string]any{"key": TaintSpot, "value": "true", "effect": "NoSchedule"}},
			"tolerations": []any{map[string]any{"key": TaintSpot, "operator": "Equal", "value": "true", "effect": "NoSchedule"}},
		},
	}}
	gpuQuota, err := c.quota(c.GPUNodes)
	if err != nil {
		return nil, err
	}
	spotQuota, err := c.quota(c.SpotNodes)
	if err != nil {
		return nil, err
	}
	cq := clusterQueue(ClusterQueueName,
		map[string]any{"name": FlavorGPU, "resources": gpuQuota},
		map[string]any{"name": FlavorSpot, "resources": spotQuota})
	objs := []*unstructured.Unstructured{gpu, spot, cq, localQueue(DefaultLocalQueue, ClusterQueueName)}
	if c.IsWorker() {
		// The manager's dispatched jobs keep the name of its LocalQueue.
		objs = append(objs, localQueue(MultiClusterQueue, ClusterQueueName))
	}
	if c.TASNodes() > 0 {
		tas, err := c.tasQueues()
		if err != nil {
			return nil, err
		}
		objs = append(objs, tas...)
	}
	return objs, nil
}

// tasQueues are the topology-aware pool's Kueue objects.
func (c Config) tasQueues() ([]*unstructured.Unstructured, error) {
	level := func(label string) any { return map[string]any{"nodeLabel": label} }
	topology := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kueueAPIVersion, "kind": "Topology",
		// Named for people (kiln submit --topology rack, kiln describe): GKE's labels, whose
		// sub-block is a rack.
		"metadata": map[string]any{"name": TopologyName, "annotations": map[string]any{kueue.AnnotationLevelNames: "block,rack,host"}},
		"spec":     map[string]any{"levels": []any{level(LabelTopologyBlock), level(LabelTopologyRack), level(LabelHostname)}},
	}}
	flavor := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kueueAPIVersion, "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": FlavorTAS},
		"spec": map[string]any{
			"nodeLabels":   map[string]any{LabelNodePool: NodePoolTAS},
			"topologyName": TopologyName,
			"tolerations":  []any{map[string]any{"key": LabelNodePool, "operator": "Equal", "value": NodePoolTAS, "effect": "NoSchedule"}},
		},
	}}
	quota, err := c.quota(c.TASNodes())
	if err != nil {
		return nil, err
	}
	cq := clusterQueue(TASClusterQueue, map[string]any{"name": FlavorTAS, "resources": quota})
	return []*unstructured.Unstructured{topology, flavor, cq, localQueue(TASLocalQueue, TASClusterQueue)}, nil
}

// clusterQueue is a ClusterQueue of every namespace, best-effort FIFO, preempting lower
// priorities within it, with one resource group of CPU, memory and GPUs over flavors.
func clusterQueue(name string, flavors ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kueueAPIVersion, "kind": "ClusterQueue",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"namespaceSelector": map[string]any{},
			"queueingStrategy":  "BestEffortFIFO",
			"preemption":        map[string]any{"withinClusterQueue": "LowerPriority"},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu", "memory", ResourceGPU},
				"flavors":          flavors,
			}},
		},
	}}
}

// localQueue is a LocalQueue of namespace default feeding clusterQueue.
func localQueue(name, clusterQueue string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kueueAPIVersion, "kind": "LocalQueue",
		"metadata": map[string]any{"name": name, "namespace": DefaultNamespace},
		"spec":     map[string]any{"clusterQueue": clusterQueue},
	}}
}

// quota is the capacity of n nodes, as ClusterQueue resources.
func (c Config) quota(n int) ([]any, error) {
	total, err := c.capacity(n)
	if err != nil {
		return nil, err
	}
	return quotaOf(total), nil
}

func (p *Platform) applyQueues(ctx context.Context, cs *cluster.Clients) error {
	objs, err := p.Queues()
	if err != nil {
		return err
	}
	if err := p.applyWhenKueueServes(ctx, cs, objs); err != nil {
		return fmt.Errorf("creating Kueue queues: %w", err)
	}
	// The namespace the queues serve enforces Pod Security's baseline, as the chart's
	// defaultQueues.localQueue.podSecurity does.
	if err := cs.Apply(ctx, PodSecurityLabels(DefaultNamespace, PodSecurityBaseline)); err != nil {
		return fmt.Errorf("labelling namespace %s for Pod Security: %w", DefaultNamespace, err)
	}
	p.logf("kueue: ResourceFlavors %s and %s, ClusterQueue %s, LocalQueue %s/%s (Pod Security: %s)", FlavorGPU, FlavorSpot, ClusterQueueName, DefaultNamespace, DefaultLocalQueue, PodSecurityBaseline)
	if p.TASNodes() > 0 {
		p.logf("kueue: Topology %s (block, rack, host), ResourceFlavor %s, ClusterQueue %s, LocalQueue %s/%s", TopologyName, FlavorTAS, TASClusterQueue, DefaultNamespace, TASLocalQueue)
	}
	return nil
}

// applyWhenKueueServes applies Kueue objects, retrying while Kueue's webhooks come up (they
// validate these, and can lag Kueue's readiness by a moment); the error is the last apply's.
func (p *Platform) applyWhenKueueServes(ctx context.Context, cs *cluster.Clients, objs []*unstructured.Unstructured) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, queueApplyDeadline, true, func(ctx context.Context) (bool, error) {
		last = cs.Apply(ctx, objs...)
		return last == nil, nil
	})
	if err != nil {
		return errors.Join(err, last)
	}
	return nil
}

// PodSecurityBaseline is the Pod Security admission level the local platform enforces on the
// namespace its queues serve.
const PodSecurityBaseline = "baseline"

// PodSecurityLabels is namespace ns as applied to enforce Pod Security admission's level on it.
func PodSecurityLabels(ns, level string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "labels": map[string]any{
			"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": "latest",
		}},
	}}
}
