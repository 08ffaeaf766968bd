package platform

import (
	"context"
	"encoding/base64"
	"encoding/json"
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
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
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
	// managerServiceAccount is the identity the manager's Kueue has on the workers: the
	// chart's multiCluster.managerServiceAccount.
	managerServiceAccount = "multikueue"
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
		&c.OperatorWebhook, &c.OperatorMetrics, &c.OperatorPprof, &c.OperatorStatus, &c.KilnAPIPort, &c.KilnAPITLSPort, &c.KilnAPIPprof, &c.OTLPPort, &c.RegistryPort}
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
		kubeconfig, err := w.managerKubeconfig(ctx)
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
	objs, err := p.managerObjects(ctx, clusters, quota)
	if err != nil {
		return err
	}
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

// managerValues are the chart's values that make a cluster the MultiKueue manager of
// workers, with the ClusterQueue, ResourceFlavor and LocalQueue (namespace default) named
// multicluster, whose quota is the workers' together.
func managerValues(workers []string, quota []resource.Quantity) ([]string, error) {
	type worker struct {
		Name             string `json:"name"`
		KubeconfigSecret string `json:"kubeconfigSecret"`
	}
	var ws []worker
	for _, w := range workers {
		ws = append(ws, worker{Name: w, KubeconfigSecret: w + "-kubeconfig"})
	}
	resources := map[string]string{}
	for i, name := range []string{"cpu", "memory", ResourceGPU} {
		resources[name] = quota[i].String()
	}
	wj, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	rj, err := json.Marshal(resources)
	if err != nil {
		return nil, err
	}
	return []string{
		"--set", "multiCluster.role=manager", "--set-json", "multiCluster.workers=" + string(wj),
		"--set", "defaultQueues.enabled=true", "--set", "defaultQueues.resourceFlavor=" + MultiClusterQueue,
		"--set", "defaultQueues.clusterQueue.name=" + MultiClusterQueue, "--set-json", "defaultQueues.clusterQueue.resources=" + string(rj),
		"--set", "defaultQueues.localQueue.name=" + MultiClusterQueue, "--set-json", `defaultQueues.localQueue.namespaces=["` + DefaultNamespace + `"]`,
	}, nil
}

// managerObjects are what the chart's manager mode creates (its default queues' hook):
// rendered from charts/kiln, as an admin's `helm install --set multiCluster.role=manager`
// would create them.
func (p *Platform) managerObjects(ctx context.Context, workers []string, quota []resource.Quantity) ([]*unstructured.Unstructured, error) {
	values, err := managerValues(workers, quota)
	if err != nil {
		return nil, err
	}
	args := append([]string{"template", ReleaseName, filepath.Join(p.Root, "charts", "kiln"), "--namespace", APIServerNamespace,
		"--set", "jobset.install=false", "--set", "kueue.install=false", "--show-only", "templates/queues.yaml"}, values...)
	rendered, err := p.Helm(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart's manager objects (make chart-deps): %w\n%s", err, rendered)
	}
	objs, err := kilntesting.DecodeManifests([]byte(rendered))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" {
			data, _, _ := unstructured.NestedString(o.Object, "data", "queues.yaml")
			return kilntesting.DecodeManifests([]byte(data))
		}
	}
	return nil, fmt.Errorf("the chart's templates/queues.yaml rendered no ConfigMap of queues")
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

// quotaOf is cpu, memory and GPUs as ClusterQueue resources (total: in that order).
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
// KWOK's controller gives up its nodes' leases first (kwokLeases says why).
func (p *Platform) StopControlPlane(ctx context.Context) error {
	if err := p.releaseKWOKLeases(ctx); err != nil {
		return err
	}
	if err := p.kwokctl(ctx, "stop", "cluster", "--name", p.ClusterName); err != nil {
		return err
	}
	return waitPortFree(ctx, p.APIServerPort, 60*time.Second)
}

// StartControlPlane starts a stopped control plane again and waits until it serves and its
// KWOK controller runs its nodes again.
func (p *Platform) StartControlPlane(ctx context.Context) error {
	start := time.Now()
	if err := p.controlPlaneUp(ctx); err != nil {
		return err
	}
	return p.awaitKWOKLeases(ctx, start, 60*time.Second)
}

// managerKubeconfig gives the worker what an admin's `helm install --set
// multiCluster.role=worker` gives it (the chart's templates/multicluster.yaml, rendered: the
// ServiceAccount the manager's Kueue acts as, its token Secret and its role) and returns the
// manager's kubeconfig for it, made as docs/multicluster.md makes it: this cluster's address,
// and the CA and token of that Secret, inline.
func (p *Platform) managerKubeconfig(ctx context.Context) ([]byte, error) {
	rendered, err := p.Helm(ctx, "template", ReleaseName, filepath.Join(p.Root, "charts", "kiln"), "--namespace", APIServerNamespace,
		"--set", "multiCluster.role=worker", "--set", "jobset.install=false", "--set", "kueue.install=false", "--show-only", "templates/multicluster.yaml")
	if err != nil {
		return nil, fmt.Errorf("rendering the chart's worker objects (make chart-deps): %w\n%s", err, rendered)
	}
	objs, err := kilntesting.DecodeManifests([]byte(rendered))
	if err != nil {
		return nil, err
	}
	cs, err := p.clients()
	if err != nil {
		return nil, err
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": APIServerNamespace}}}
	if err := cs.Apply(ctx, append([]*unstructured.Unstructured{ns}, objs...)...); err != nil {
		return nil, fmt.Errorf("installing the chart's worker objects: %w", err)
	}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	var ca, token []byte
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, p.ComponentTimeout, true, func(ctx context.Context) (bool, error) {
		s, err := cs.Dyn.Resource(secrets).Namespace(APIServerNamespace).Get(ctx, managerServiceAccount+"-token", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		data, _, _ := unstructured.NestedStringMap(s.Object, "data")
		if ca, err = base64.StdEncoding.DecodeString(data["ca.crt"]); err != nil || len(ca) == 0 {
			return false, nil
		}
		token, err = base64.StdEncoding.DecodeString(data["token"])
		return err == nil && len(token) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the token of ServiceAccount %s/%s was never issued: %w", APIServerNamespace, managerServiceAccount, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[p.ClusterName] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://127.0.0.1:%d", p.APIServerPort), CertificateAuthorityData: ca}
	cfg.AuthInfos[managerServiceAccount] = &clientcmdapi.AuthInfo{Token: string(token)}
	cfg.Contexts[p.ClusterName] = &clientcmdapi.Context{Cluster: p.ClusterName, AuthInfo: managerServiceAccount}
	cfg.CurrentContext = p.ClusterName
	return clientcmd.Write(*cfg)
}
