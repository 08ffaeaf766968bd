package platform

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestWorkersHaveTheirOwnPortsAndState(t *testing.T) {
	manager := DefaultConfig("/repo")
	manager.Workers = maxWorkers
	used := map[int]string{}
	dirs := map[string]bool{}
	for i := 0; i <= maxWorkers; i++ {
		c, name := manager, manager.ClusterName
		if i > 0 {
			c, name = manager.Worker(i), manager.WorkerName(i)
		}
		if c.ClusterName != name || dirs[c.StateDir] {
			t.Errorf("cluster %d: name %q, state %s: want %q in a directory of its own", i, c.ClusterName, c.StateDir, name)
		}
		dirs[c.StateDir] = true
		for _, p := range c.ports() {
			if other, ok := used[*p]; ok {
				t.Errorf("port %d of %s is %s's too", *p, name, other)
			}
			used[*p] = name
		}
	}
	w := manager.Worker(1)
	if w.RealNodes != 0 || w.Workers != 0 || !w.IsWorker() || manager.IsWorker() || !w.WithoutKilnAPIServer {
		t.Errorf("worker 1 = %+v: want no real node, no workers of its own, no API server", w)
	}
	if got, want := w.StateDir, filepath.Join("/repo", "bin", "platform", "workers", "kiln-worker-1"); got != want {
		t.Errorf("worker 1's state is in %s, want %s", got, want)
	}
	if w.GPUProduct == manager.Worker(2).GPUProduct {
		t.Errorf("workers 1 and 2 both have %s: want different GPU products", w.GPUProduct)
	}
}

func TestWorkerNamed(t *testing.T) {
	c := DefaultConfig("/repo")
	c.Workers = 2
	w, err := c.WorkerNamed("kiln-worker-2")
	if err != nil || w.ClusterName != "kiln-worker-2" || w.APIServerPort != c.APIServerPort+2*workerPortStep {
		t.Errorf("WorkerNamed(kiln-worker-2) = %s :%d, %v", w.ClusterName, w.APIServerPort, err)
	}
	if _, err := c.WorkerNamed("kiln-worker"); err == nil {
		t.Error("WorkerNamed(kiln-worker) found a worker")
	}
}

// The manager's dispatching queue has the workers' quota together; each worker has the
// LocalQueue of the same name, in front of its own ClusterQueue.
func TestMultiKueueQueues(t *testing.T) {
	manager := DefaultConfig("/repo")
	manager.Workers = 2
	for i := 1; i <= 2; i++ {
		objs, err := manager.Worker(i).Queues()
		if err != nil {
			t.Fatal(err)
		}
		if lq := find(objs, "LocalQueue", MultiClusterQueue); lq == nil || lq.Object["spec"].(map[string]any)["clusterQueue"] != ClusterQueueName {
			t.Errorf("worker %d: LocalQueue %s = %v, want one feeding %s", i, MultiClusterQueue, lq, ClusterQueueName)
		}
	}
	w1, _ := manager.Worker(1).capacity(2)
	w2, _ := manager.Worker(2).capacity(1)
	objs := manager.multiKueueObjects([]string{"kiln-worker-1", "kiln-worker-2"}, sumQuantities(w1, w2))
	cq := find(objs, "ClusterQueue", MultiClusterQueue)
	if cq == nil {
		t.Fatalf("no ClusterQueue %s among %d objects", MultiClusterQueue, len(objs))
	}
	flavors, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	got := fmt.Sprint(flavors[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"])
	if want := "[map[name:cpu nominalQuota:96] map[name:memory nominalQuota:768Gi] map[name:nvidia.com/gpu nominalQuota:24]]"; got != want {
		t.Errorf("the manager's quota = %s, want the workers' together, %s", got, want)
	}
	checks, _, _ := unstructured.NestedSlice(cq.Object, "spec", "admissionChecksStrategy", "admissionChecks")
	if diff := cmp.Diff([]any{map[string]any{"name": MultiClusterQueue}}, checks); diff != "" {
		t.Errorf("admission checks (-want +got):\n%s", diff)
	}
	clusters, _, _ := unstructured.NestedSlice(find(objs, "MultiKueueConfig", MultiClusterQueue).Object, "spec", "clusters")
	if diff := cmp.Diff([]any{"kiln-worker-1", "kiln-worker-2"}, clusters); diff != "" {
		t.Errorf("MultiKueueConfig clusters (-want +got):\n%s", diff)
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}
