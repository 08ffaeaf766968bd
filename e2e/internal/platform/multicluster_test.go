package platform

import (
	"path/filepath"
	"strings"
	"testing"

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
	values, err := managerValues([]string{"kiln-worker-1", "kiln-worker-2"}, sumQuantities(w1, w2))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(values, " ")
	for _, want := range []string{
		"multiCluster.role=manager",
		`multiCluster.workers=[{"name":"kiln-worker-1","kubeconfigSecret":"kiln-worker-1-kubeconfig"},{"name":"kiln-worker-2","kubeconfigSecret":"kiln-worker-2-kubeconfig"}]`,
		`defaultQueues.clusterQueue.resources={"cpu":"96","memory":"768Gi","nvidia.com/gpu":"24"}`,
		"defaultQueues.localQueue.name=multicluster",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the manager's chart values %s lack %s", got, want)
		}
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
