package platform

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
)

// Several clusters on one machine: with Workers > 0 the platform is a MultiKueue manager,
// and each worker is a platform of its own (control plane, KWOK fleet, JobSet, Kueue and
// Kiln's operator as processes, the runtime catalog), with its own cluster name, state
// directory and ports. The manager's Kueue dispatches the jobs of its LocalQueue
// `multicluster` to the workers; each worker runs them in its LocalQueue of the same name.
// The real node, the registry and Kiln's API server stay on the manager.
const (
	// EnvWorkers sets Workers.
	EnvWorkers = "KILN_WORKERS"
	// MultiClusterQueue names the LocalQueue (namespace default) whose jobs MultiKueue
	// dispatches, on the manager and on every worker, and on the manager its ClusterQueue,
	// ResourceFlavor, AdmissionCheck and MultiKueueConfig.
	MultiClusterQueue = "multicluster"
	// MultiKueueOrigin is the manager's name on the copies it creates on the workers (their
	// label kueue.x-k8s.io/multikueue-origin).
	MultiKueueOrigin = "kiln"
	// MultiKueueWorkerLostTimeout is how long a job stays on a worker that cannot be reached
	// before the manager dispatches it again (Kueue's default is 15 minutes; the tests lose
	// a worker on purpose).
	MultiKueueWorkerLostTimeout = 30 * time.Second
	// kueueNamespace is where Kueue reads the workers' kubeconfig Secrets.
	kueueNamespace = "kueue-system"
	// multiKueueUser is the identity the manager's Kueue has on the workers.
	multiKueueUser = "kiln-multikueue"
	// workerPortStep separates the ports of consecutive clusters.
	workerPortStep = 20
	maxWorkers     = 8
)

// workerFleets are the workers' GPU nodes: worker 1 has 2 nodes of H100s, worker 2 one
// node of A100s, and so on in turn, so that quotas and GPU products differ.
var workerFleets = []struct {
	nodes   int
	product string
}{{2, "NVIDIA-H100-80GB-HBM3"}, {1, "NVIDIA-A100-SXM4-80GB"}}

// ports are the Config's TCP ports on 127.0.0.1 (kwokctl picks etcd's and the other
// control-plane components' own free ports).
func (c *Config) ports() []*int {
	return []*int{&c.APIServerPort, &c.JobSetWebhook, &c.JobSetHealth, &c.KueueWebhook, &c.KueueHealth, &c.OperatorHealth,
		&c.OperatorWebhook, &c.OperatorMetrics, &c.OperatorPprof, &c.OperatorStatus, &c.KilnAPIPort, &c.KilnAPITLSPort, &c.OTLPPort, &c.RegistryPort}
}

// WorkerName is the cluster name of worker i (from 1), also its MultiKueueCluster's name.
func (c Config) WorkerName(i int) string { return fmt.Sprintf("%s-worker-%d", c.ClusterName, i) }

// Worker is the configuration of worker i (from 1) of this manager.
func (c Config) Worker(i int) Config {
	w := c
	w.ClusterName = c.WorkerName(i)
	w.StateDir = filepath.Join(c.StateDir, "workers", w.ClusterName)
	w.ManagerName = c.ClusterName
	for _, p := range w.ports() {
		*p += i * workerPortStep
	}
	fleet := workerFleets[(i-1)%len(workerFleets)]
	w.GPUNodes, w.GPUProduct = fleet.nodes, fleet.product
	w.Workers, w.RealNodes, w.SpotNodes, w.TASBlocks = 0, 0, 0, 0
	w.Install, w.ChartFrom = InstallProcesses, ""
	w.WithoutKilnAPIServer, w.WithoutTracing, w.AuditNamespaces = true, true, nil
	return w
}

// WorkerNamed is the configuration of the worker cluster of that name.
func (c Config) WorkerNamed(name string) (Config, error) {
	var names []string
	for i := 1; i <= maxWorkers; i++ {
		if c.WorkerName(i) == name {
			return c.Worker(i), nil
		}
		if i <= max(c.Workers, 2) {
			names = append(names, c.WorkerName(i))
		}
	}
	return Config{}, fmt.Errorf("no worker cluster %q: the workers are named %v", name, names)
}

// IsWorker reports whether this is a worker's configuration.
func (c Config) IsWorker() bool { return c.ManagerName != "" }

// multiKueueConfig is the manager Kueue's `multiKueue` configuration, nil without workers.
func (c Config) multiKueueConfig() map[string]any {
	if c.Workers == 0 {
		return nil
	}
	return map[string]any{"origin": MultiKueueOrigin, "gcInterval": "30s", "workerLostTimeout": MultiKueueWorkerLostTimeout.String()}
}

// workersUp brings every worker up, then the manager's MultiKueue objects.
func (p *Platform) workersUp(ctx context.Context, cs *cluster.Clients) error {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": kueueNamespace}}}
	if err := cs.Apply(ctx, ns); err != nil {
		return err
	}
	var clusters []string
	var quota []resource.Quantity
	for i := 1; i <= p.Workers; i++ {
		w := &Platform{Config: p.Worker(i), Out: p.Out}
		p.logf("worker %s: starting (API server https://127.0.0.1:%d, %d GPU nodes of %s)", w.ClusterName, w.APIServerPort, w.GPUNodes, w.GPUProduct)
		if err := w.Up(ctx); err != nil {
			return fmt.Errorf("worker %s: %w", w.ClusterName, err)
		}
		kubeconfig, err := w.issueKubeconfig(ctx, multiKueueUser, "system:masters")
		if err != nil {
			return fmt.Errorf("worker %s: %w", w.ClusterName, err)
		}
		if err := cs.Apply(ctx, workerSecret(w.ClusterName, kubeconfig)); err != nil {
			return err
		}
		clusters = append(clusters, w.ClusterName)
		q, err := w.capacity(w.GPUNodes)
		if err != nil {
			return err
		}
		quota = sumQuantities(quota, q)
	}
	objs := p.multiKueueObjects(clusters, quota)
	if err := p.applyWhenKueueServes(ctx, cs, objs); err != nil {
		return fmt.Errorf("configuring MultiKueue: %w", err)
	}
	if err := waitMultiKueueActive(ctx, cs, clusters, p.ComponentTimeout); err != nil {
		return err
	}
	p.logf("multikueue: ClusterQueue %s dispatches LocalQueue %s/%s to %v", MultiClusterQueue, DefaultNamespace, MultiClusterQueue, clusters)
	return nil
}

// workerSecret is the kubeconfig Secret of a worker, where the manager's Kueue reads it.
func workerSecret(name string, kubeconfig []byte) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": name + "-kubeconfig", "namespace": kueueNamespace},
		"stringData": map[string]any{"kubeconfig": string(kubeconfig)},
	}}
}

// multiKueueObjects are the manager's MultiKueue objects: a MultiKueueCluster per worker,
// the MultiKueueConfig and AdmissionCheck naming them, and the ClusterQueue `multicluster`
// (whose quota is the workers' together) with its flavor and LocalQueue.
func (c Config) multiKueueObjects(workers []string, quota []resource.Quantity) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	var names []any
	for _, w := range workers {
		names = append(names, w)
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kueueAPIVersion, "kind": "MultiKueueCluster",
			"metadata": map[string]any{"name": w},
			"spec": map[string]any{"clusterSource": map[string]any{"kubeConfig": map[string]any{
				"locationType": "Secret", "location": w + "-kubeconfig",
			}}},
		}})
	}
	cq := clusterQueue(MultiClusterQueue, map[string]any{"name": MultiClusterQueue, "resources": quotaOf(quota)})
	cq.Object["spec"].(map[string]any)["admissionChecksStrategy"] = map[string]any{"admissionChecks": []any{map[string]any{"name": MultiClusterQueue}}}
	return append(objs,
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kueueAPIVersion, "kind": "MultiKueueConfig",
			"metadata": map[string]any{"name": MultiClusterQueue},
			"spec":     map[string]any{"clusters": names},
		}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kueueAPIVersion, "kind": "AdmissionCheck",
			"metadata": map[string]any{"name": MultiClusterQueue},
			"spec": map[string]any{
				"controllerName": "kueue.x-k8s.io/multikueue",
				"parameters":     map[string]any{"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MultiClusterQueue},
			},
		}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kueueAPIVersion, "kind": "ResourceFlavor",
			"metadata": map[string]any{"name": MultiClusterQueue},
		}},
		cq,
		localQueue(MultiClusterQueue, MultiClusterQueue),
	)
}

// capacity is the cpu, memory and GPUs of n nodes.
func (c Config) capacity(n int) ([]resource.Quantity, error) {
	var out []resource.Quantity
	for _, per := range []string{c.NodeCPU, c.NodeMemory, strconv.Itoa(c.GPUsPerNode)} {
		q, err := resource.ParseQuantity(per)
		if err != nil {
			return nil, fmt.Errorf("node capacity %q: %w", per, err)
		}
		total := resource.NewQuantity(0, q.Format)
		for range n {
			total.Add(q)
		}
		out = append(out, *total)
	}
	return out, nil
}

// quotaOf is cpu, memory and GPUs as ClusterQueue resources.
func quotaOf(total []resource.Quantity) []any {
	var out []any
	for i, name := range []string{"cpu", "memory", ResourceGPU} {
		out = append(out, map[string]any{"name": name, "nominalQuota": total[i].String()})
	}
	return out
}

func sumQuantities(a, b []resource.Quantity) []resource.Quantity {
	if a == nil {
		return b
	}
	for i := range a {
		a[i].Add(b[i])
	}
	return a
}

// waitMultiKueueActive waits until the manager's Kueue reaches every worker.
func waitMultiKueueActive(ctx context.Context, cs *cluster.Clients, clusters []string, timeout time.Duration) error {
	gvr := schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "multikueueclusters"}
	for _, name := range clusters {
		var last *unstructured.Unstructured
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			obj, err := cs.Dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			last = obj
			return cluster.ConditionTrue(obj, "Active"), nil
		})
		if err != nil {
			conds := "no status"
			if last != nil {
				c, _, _ := unstructured.NestedSlice(last.Object, "status", "conditions")
				conds = fmt.Sprint(c)
			}
			return fmt.Errorf("MultiKueueCluster %s is not Active (%s): %w", name, conds, err)
		}
	}
	return nil
}

// workersDown stops every worker this manager has state for.
func (p *Platform) workersDown(ctx context.Context) error {
	var errs []error
	for i := 1; i <= maxWorkers; i++ {
		w := &Platform{Config: p.Worker(i), Out: p.Out}
		if _, err := os.Stat(w.StateDir); err != nil {
			continue
		}
		p.logf("worker %s: stopping", w.ClusterName)
		errs = append(errs, w.Down(ctx), os.RemoveAll(w.StateDir))
	}
	return errors.Join(errs...)
}

// StopControlPlane stops the cluster's control plane (etcd, kube-apiserver, the controller
// manager, the scheduler, KWOK), as a cluster lost to everyone who uses it: what runs beside
// it (JobSet, Kueue, Kiln) keeps retrying.
func (p *Platform) StopControlPlane(ctx context.Context) error {
	if err := p.kwokctl(ctx, "stop", "cluster", "--name", p.ClusterName); err != nil {
		return err
	}
	return waitPortFree(ctx, p.APIServerPort, 60*time.Second)
}

// StartControlPlane starts a stopped control plane again and waits until it serves.
func (p *Platform) StartControlPlane(ctx context.Context) error {
	return p.controlPlaneUp(ctx)
}
