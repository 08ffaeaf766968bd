package e2e

import (
	"context"
	"fmt"
	"net"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func yamlInto(doc string, u *unstructured.Unstructured) error {
	return yaml.Unmarshal([]byte(doc), &u.Object)
}

// strayListeners lists sockets of local platform processes that listen beyond 127.0.0.1
// and the real node's address on the platform's own bridge (the kubelet, CoreDNS, the
// apiserver's forward for pods). It needs KILN_ROOT (the repository), so it only runs on
// the local platform.
func strayListeners() ([]string, error) {
	root := os.Getenv("KILN_ROOT")
	if root == "" {
		Skip("KILN_ROOT is not set: not running on the local platform")
	}
	pids := platform.DefaultConfig(root).PIDs()
	if len(pids) == 0 {
		Skip("no local platform processes found under " + root)
	}
	ls, err := platform.Listeners(pids)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, l := range ls {
		if !l.Addr.IsLoopback() && !l.Addr.Equal(net.ParseIP(platform.NodeIP)) {
			bad = append(bad, l.String())
		}
	}
	return bad, nil
}

// namespaceQueue creates a ClusterQueue named ns that admits namespace ns only, with gpus GPUs of flavor
// (CPU and memory never the limit) and preemption of lower priorities within it, and the LocalQueue local in
// ns pointing at it. A spec's own ClusterQueue also keeps it clear of Kueue's memory of workloads that did not fit
// (SchedulingEquivalenceHashing remembers their shape per ClusterQueue, across namespaces).
func namespaceQueue(ctx context.Context, ns, local, flavor string, gpus int) {
	GinkgoHelper()
	cq := kueueObject("ClusterQueue", "", ns)
	Expect(yamlInto(fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: %[1]s}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: %[2]s
      resources:
      - {name: cpu, nominalQuota: "512"}
      - {name: memory, nominalQuota: 4Ti}
      - {name: nvidia.com/gpu, nominalQuota: "%[3]d"}
`, ns, flavor, gpus), cq)).To(Succeed())
	Expect(k8s.Create(ctx, cq)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, cq))).To(Succeed()) })
	lq := kueueObject("LocalQueue", ns, local)
	Expect(unstructured.SetNestedField(lq.Object, ns, "spec", "clusterQueue")).To(Succeed())
	Expect(k8s.Create(ctx, lq)).To(Succeed())
}

// smallQueue is namespaceQueue with one GPU node's quota (8 GPUs), as LocalQueue "queue".
func smallQueue(ctx context.Context, ns string) {
	GinkgoHelper()
	namespaceQueue(ctx, ns, "queue", platform.FlavorGPU, 8)
}
