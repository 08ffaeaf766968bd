package platform

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
	"github.com/kiln-ml/kiln/e2e/internal/platform/process"
	"github.com/kiln-ml/kiln/e2e/internal/platform/realnode"
)

//go:embed stages.yaml
var podStages string

//go:embed kube-scheduler.yaml
var schedulerConfig []byte

// kwokctlConfig renders the KwokctlConfiguration plus stages and logs for the cluster.
// upstreamStages is KWOK's own node-initialize, node-heartbeat-with-lease and pod-ready
// stages, copied from the pinned module at build time so they always match the kwok
// binary: any Stage given to kwokctl replaces all of its defaults.
func (c Config) kwokctlConfig(upstreamStages string) (string, error) {
	options := map[string]any{
		"runtime":                     "binary",
		"bindAddress":                 "127.0.0.1",
		"securePort":                  true,
		"kubeAuthorization":           true,
		"kubeAdmission":               true,
		"kubeApiserverPort":           c.APIServerPort,
		"etcdBinary":                  c.Bin("etcd"),
		"kubeApiserverBinary":         c.Bin("kube-apiserver"),
		"kubeControllerManagerBinary": c.Bin("kube-controller-manager"),
		"kubeSchedulerBinary":         c.Bin("kube-scheduler"),
		"kubectlBinary":               c.Bin("kubectl"),
		"kwokControllerBinary":        c.Bin("kwok"),
		// Pods reach the apiserver through the kubernetes Service, by its ClusterIP.
		"kubeApiserverCertSANs": []string{realnode.KubernetesServiceIP, realnode.NodeIP},
	}
	if len(c.AuditNamespaces) > 0 {
		policy := filepath.Join(c.ConfigDir(), "audit-policy.yaml")
		if err := os.WriteFile(policy, auditWritesPolicy(c.AuditNamespaces), 0o644); err != nil {
			return "", fmt.Errorf("writing the audit policy: %w", err)
		}
		options["kubeAuditPolicy"] = policy
	}
	schedulerPath := filepath.Join(c.ConfigDir(), "kube-scheduler.yaml")
	if err := os.WriteFile(schedulerPath, schedulerConfig, 0o644); err != nil {
		return "", fmt.Errorf("writing the scheduler's configuration: %w", err)
	}
	options["kubeSchedulerConfig"] = schedulerPath
	// The Job controller gets a client budget that keeps it out of the way when a thousand
	// training pods start at once (its default is 20 QPS); the scheduler's is in its
	// configuration.
	budget := []any{map[string]any{"key": "kube-api-qps", "value": "200"}, map[string]any{"key": "kube-api-burst", "value": "400"}}
	cfg := map[string]any{
		"apiVersion": "config.kwok.x-k8s.io/v1alpha1",
		"kind":       "KwokctlConfiguration",
		"options":    options,
		"componentsPatches": []any{
			map[string]any{"name": "kube-controller-manager", "extraArgs": budget},
			// On 2 cores the apiserver is what everything waits for, and a quarter of its CPU is
			// garbage collection: it gets memory (this machine has plenty) in exchange. A
			// worker cluster's sees a few jobs at a time, and keeps Go's default.
			map[string]any{
				"name":      "kube-apiserver",
				"extraEnvs": []any{map[string]any{"name": "GOGC", "value": c.apiserverGOGC()}},
				"extraArgs": c.apiserverNodeArgs(),
			},
			// KWOK keeps to its own nodes (and their pods): the real node has a kubelet.
			map[string]any{"name": "kwok-controller", "extraArgs": []any{
				map[string]any{"key": "manage-all-nodes", "value": "false", "override": true},
				map[string]any{"key": "manage-nodes-with-annotation-selector", "value": kwokNodeAnnotation + "=fake"},
			}},
		},
	}
	head, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("encoding kwokctl configuration: %w", err)
	}
	docs := []string{string(head)}
	data, err := os.ReadFile(upstreamStages)
	if err != nil {
		return "", fmt.Errorf("reading KWOK's stages (run `make tools`): %w", err)
	}
	docs = append(docs, strings.TrimSpace(string(data)))
	docs = append(docs, strings.ReplaceAll(podStages, "__RUN_MILLISECONDS__", strconv.FormatInt(c.PodRunDuration.Milliseconds(), 10)))
	logs, err := yaml.Marshal(map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "ClusterLogs",
		"metadata":   map[string]any{"name": "all-pods"},
		"spec": map[string]any{
			"logs": []any{map[string]any{"containers": []string{}, "logsFile": c.PodLogFile()}},
		},
	})
	if err != nil {
		return "", fmt.Errorf("encoding KWOK logs: %w", err)
	}
	docs = append(docs, string(logs))
	return strings.Join(docs, "\n---\n"), nil
}

func (c Config) apiserverGOGC() string {
	if c.IsWorker() {
		return "100"
	}
	return "400"
}

// apiserverNodeArgs give the apiserver the cluster's network (Services in ServiceCIDR, its
// own endpoint NodeIP, where the platform forwards to it) and what it needs to reach a
// kubelet for logs, exec and port-forward: a client certificate, and the node's InternalIP
// (KWOK's nodes have only a Hostname, localhost).
func (c Config) apiserverNodeArgs() []any {
	pki := filepath.Join(c.ClusterDir(), "pki")
	arg := func(k, v string) any { return map[string]any{"key": k, "value": v} }
	return []any{
		arg("service-cluster-ip-range", realnode.ServiceCIDR),
		arg("advertise-address", realnode.NodeIP),
		arg("kubelet-client-certificate", filepath.Join(pki, "admin.crt")),
		arg("kubelet-client-key", filepath.Join(pki, "admin.key")),
		arg("kubelet-preferred-address-types", "InternalIP,Hostname"),
	}
}

// auditWritesPolicy logs each write request in the namespaces once, when its answer is
// sent: a TrainJob's status writes with their bodies (which transition each wrote), the
// rest without.
func auditWritesPolicy(namespaces []string) []byte {
	policy, _ := yaml.Marshal(map[string]any{
		"apiVersion": "audit.k8s.io/v1",
		"kind":       "Policy",
		"omitStages": []string{"RequestReceived", "ResponseStarted"},
		"rules": []any{
			map[string]any{"level": "Request", "verbs": []string{"update", "patch"}, "namespaces": namespaces,
				"resources": []any{map[string]any{"group": "trainer.kubeflow.org", "resources": []string{"trainjobs/status"}}}},
			map[string]any{"level": "Metadata", "verbs": []string{"create", "update", "patch", "delete", "deletecollection"}, "namespaces": namespaces},
			map[string]any{"level": "None"},
		},
	})
	return policy
}

// PodLogFile is the CRI-format log every KWOK pod serves through `kubectl logs`.
func (c Config) PodLogFile() string { return filepath.Join(c.StateDir, "pod.log") }

// podLog is what every simulated training container prints.
const podLog = `2026-01-01T00:00:00.000000000Z stdout F [kiln-sim] starting training
2026-01-01T00:00:01.000000000Z stdout F [kiln-sim] step 1/3 loss=2.31
2026-01-01T00:00:02.000000000Z stdout F [kiln-sim] step 2/3 loss=1.87
2026-01-01T00:00:03.000000000Z stdout F [kiln-sim] step 3/3 loss=1.42
2026-01-01T00:00:04.000000000Z stdout F [kiln-sim] training complete
`

func (c Config) kwokctl(ctx context.Context, args ...string) error {
	_, err := c.kwokctlOutput(ctx, args...)
	return err
}

func (c Config) kwokctlOutput(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.Bin("kwokctl"), args...)
	// kwokctl looks kubectl up in PATH first; ours is in bin/.
	// KUBECACHEDIR keeps kubectl's discovery cache out of $HOME.
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.KwokWorkdir(), "KUBECACHEDIR="+filepath.Join(c.StateDir, "kube-cache"),
		"PATH="+c.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kwokctl %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out, nil
}

// issueKubeconfig is a kubeconfig for user in group, with a client certificate the
// cluster's CA signs.
func (c Config) issueKubeconfig(ctx context.Context, user, group string) ([]byte, error) {
	return c.kwokctlOutput(ctx, "get", "kubeconfig", "--name", c.ClusterName, "--user", user, "--group", group)
}

// componentLogs returns the tail of each control-plane component's log, for errors.
func (c Config) componentLogs() string {
	paths, _ := filepath.Glob(filepath.Join(c.ClusterDir(), "logs", "*.log"))
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "--- %s (last 15 lines)\n%s\n", filepath.Base(p), process.Tail(p, 15))
	}
	return b.String()
}

// applyPodGroupCRD installs scheduler-plugins' PodGroup CRD, whose gangs the platform's
// scheduler (kube-scheduler.yaml) schedules: it comes with the scheduler, whatever installs
// Kiln.
func (p *Platform) applyPodGroupCRD(ctx context.Context, cs *cluster.Clients) error {
	objs, err := kilntesting.ReadManifests(filepath.Join(p.ManifestsDir(), "podgroups-coscheduling.yaml"))
	if err != nil {
		return fmt.Errorf("the PodGroup CRD (run `make tools`): %w", err)
	}
	if err := cs.Apply(ctx, objs...); err != nil {
		return fmt.Errorf("installing the PodGroup CRD: %w", err)
	}
	return cs.WaitCRDsEstablished(ctx, objs)
}

// kwokNodeAnnotation marks the nodes KWOK's controller manages (the real node has a kubelet).
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// KWOK's controller holds each of its nodes by the node's Lease, under an identity new to
// each process, for 200 s (kwokctl's 40 s times its heartbeat factor of 5). A controller
// started with a control plane that stopped while another held them manages none of its
// nodes until those leases expire: its new pods stay Pending, the pods being deleted stay
// Terminating (holding their GPUs), and the nodes go NotReady. So a control plane the
// platform stops releases them first, and one it starts again is up once they are held.

// kwokLeases are the names of the node Leases of the cluster's KWOK nodes (a node's Lease
// has the node's name, in kube-node-lease).
func kwokLeases(ctx context.Context, cs *cluster.Clients) ([]string, error) {
	nodes, err := cs.Dyn.Resource(cluster.NodeGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	var names []string
	for _, n := range nodes.Items {
		if _, ok := n.GetAnnotations()[kwokNodeAnnotation]; ok {
			names = append(names, n.GetName())
		}
	}
	return names, nil
}

// releaseKWOKLeases deletes the node Leases of the KWOK nodes, so that the next KWOK
// controller creates them at once instead of waiting for this one's to expire. The control
// plane stops right after: this controller renews a Lease only every 50 s.
func (p *Platform) releaseKWOKLeases(ctx context.Context) error {
	cs, err := p.clients()
	if err != nil {
		return err
	}
	names, err := kwokLeases(ctx, cs)
	if err != nil {
		return err
	}
	for _, name := range names {
		err := cs.Dyn.Resource(cluster.LeaseGVR).Namespace(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing the lease of KWOK's node %s: %w", name, err)
		}
	}
	return nil
}

// awaitKWOKLeases waits until every KWOK node's Lease was renewed at or after since, by the
// KWOK controller that started with the control plane.
func (p *Platform) awaitKWOKLeases(ctx context.Context, since time.Time, timeout time.Duration) error {
	cs, err := p.clients()
	if err != nil {
		return err
	}
	var waiting []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		names, err := kwokLeases(ctx, cs)
		if err != nil {
			return false, nil
		}
		waiting = waiting[:0]
		for _, name := range names {
			l, err := cs.Dyn.Resource(cluster.LeaseGVR).Namespace(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				waiting = append(waiting, name+" (no lease)")
				continue
			}
			renewed, _, _ := unstructured.NestedString(l.Object, "spec", "renewTime")
			if t, err := time.Parse(time.RFC3339Nano, renewed); err != nil || t.Before(since.Truncate(time.Second)) {
				waiting = append(waiting, fmt.Sprintf("%s (renewed %s)", name, renewed))
			}
		}
		return len(waiting) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("KWOK's controller does not hold its nodes' leases %s after the control plane started: %v (its log: %s)",
			timeout, waiting, filepath.Join(p.ClusterDir(), "logs", "kwok-controller.log"))
	}
	return nil
}
