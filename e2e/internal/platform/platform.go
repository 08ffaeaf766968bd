package platform

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// FieldManager owns everything the harness applies.
const FieldManager = "kiln-platform"

// Platform starts, inspects and stops the local platform described by a Config.
type Platform struct {
	Config
	Out io.Writer
}

func (p *Platform) logf(format string, args ...any) {
	fmt.Fprintf(p.Out, format+"\n", args...)
}

// Up brings every component up, or leaves running ones alone: it is idempotent.
func (p *Platform) Up(ctx context.Context) error {
	start := time.Now()
	for _, d := range []string{p.StateDir, p.ConfigDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	if err := p.PKI().Ensure(time.Now()); err != nil {
		return err
	}
	if err := os.WriteFile(p.PodLogFile(), []byte(podLog), 0o644); err != nil {
		return fmt.Errorf("writing simulated pod log: %w", err)
	}
	if err := p.controlPlaneUp(ctx); err != nil {
		return err
	}
	cs, err := p.clients()
	if err != nil {
		return err
	}
	if err := p.applyNodes(ctx, cs); err != nil {
		return err
	}
	if err := p.realNodeUp(ctx, cs); err != nil {
		return err
	}
	// The chart installs JobSet and Kueue itself, from their own charts.
	if p.Install != InstallChart {
		if err := p.addonsUp(ctx, cs); err != nil {
			return err
		}
	}
	trainerUp := p.kilnUp
	if p.Trainer == TrainerUpstream {
		trainerUp = p.upstreamUp
	}
	if err := trainerUp(ctx, cs); err != nil {
		return err
	}
	if err := p.applyQueues(ctx, cs); err != nil {
		return err
	}
	if err := p.waitNodesReady(ctx, cs); err != nil {
		return err
	}
	p.logf("Local platform is up in %s.", time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (p *Platform) controlPlaneUp(ctx context.Context) error {
	if p.apiServerHealthy(ctx) {
		p.logf("control plane: already running (%s)", p.Kubeconfig())
		return nil
	}
	if _, err := os.Stat(filepath.Join(p.ClusterDir(), "kwok.yaml")); err == nil {
		p.logf("control plane: starting the existing cluster %q", p.ClusterName)
		if err := p.kwokctl(ctx, "start", "cluster", "--name", p.ClusterName, "--wait", "90s"); err != nil {
			return fmt.Errorf("starting the control plane: %w\n%s", err, p.componentLogs())
		}
		return nil
	}
	stagesPath := filepath.Join(p.ManifestsDir(), "kwok-stages.yaml")
	cfg, err := p.kwokctlConfig(stagesPath)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(p.ConfigDir(), "kwokctl.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("writing kwokctl configuration: %w", err)
	}
	p.logf("control plane: creating cluster %q (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)", p.ClusterName)
	// --kubeconfig "" keeps kwokctl from merging a context into ~/.kube/config.
	err = p.kwokctl(ctx, "create", "cluster", "--name", p.ClusterName, "--config", cfgPath, "--kubeconfig", "", "--wait", "90s")
	if err != nil {
		return fmt.Errorf("creating the control plane: %w\n%s", err, p.componentLogs())
	}
	return nil
}

func (p *Platform) apiServerHealthy(ctx context.Context) bool {
	if _, err := os.Stat(p.Kubeconfig()); err != nil {
		return false
	}
	cs, err := p.clients()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = cs.disco.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}

// clientSet bundles the clients the harness needs.
type clientSet struct {
	config *rest.Config
	disco  *discovery.DiscoveryClient
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// RESTConfig is the admin kubeconfig with its CA and client certificate read in. Given
// file names, client-go caches its TLS transports by those names, and a platform created
// again in the same process (as `make bench` does) has new certificates under the same names.
func (c Config) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", c.Kubeconfig(), err)
	}
	for _, f := range []struct {
		file *string
		data *[]byte
	}{{&cfg.CAFile, &cfg.CAData}, {&cfg.CertFile, &cfg.CertData}, {&cfg.KeyFile, &cfg.KeyData}} {
		if *f.file == "" {
			continue
		}
		data, err := os.ReadFile(*f.file)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", c.Kubeconfig(), err)
		}
		*f.data, *f.file = data, ""
	}
	return cfg, nil
}

func (p *Platform) clients() (*clientSet, error) {
	cfg, err := p.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating dynamic client: %w", err)
	}
	return &clientSet{
		config: cfg,
		disco:  disco,
		dyn:    dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
	}, nil
}

// apply server-side applies objects in order, refreshing discovery when a kind is new.
func (cs *clientSet) apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := cs.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			cs.mapper.Reset()
			mapping, err = cs.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return fmt.Errorf("mapping %s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = cs.dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = cs.dyn.Resource(mapping.Resource).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// waitCRDsEstablished waits until the apiserver serves every CRD among objs.
func (cs *clientSet) waitCRDsEstablished(ctx context.Context, objs []*unstructured.Unstructured) error {
	gvr := crdGVR
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		name := obj.GetName()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := cs.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return conditionTrue(crd, "Established"), nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s is not established: %w", name, err)
		}
	}
	cs.mapper.Reset()
	return nil
}

// conditionTrue reports whether obj's status has condition t with status True.
func conditionTrue(obj *unstructured.Unstructured, t string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == t {
			return m["status"] == "True"
		}
	}
	return false
}

// stopProcess stops proc (see Process.Stop), saying so when it ran.
func (p *Platform) stopProcess(proc Process) error {
	if _, running := proc.Running(); running {
		p.logf("stopping %s", proc.Name)
	}
	return proc.Stop(15 * time.Second)
}

// tlsListening reports whether a TLS server on 127.0.0.1:port accepts connections.
func tlsListening(ctx context.Context, port int) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a readiness probe, not a client
	conn, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// httpOK reports whether url answers 200.
func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Down stops every process Up started and deletes the cluster's state.
func (p *Platform) Down(ctx context.Context) error {
	var errs []error
	procs := append([]Process{p.APIServerProcess(), p.OperatorProcess(), p.UpstreamProcess()}, p.chartForwards("")...)
	for _, proc := range append(procs, p.addonProcesses()...) {
		if err := p.stopProcess(proc); err != nil {
			errs = append(errs, err)
		}
	}
	// Always, whatever RealNodes says: a node left by an earlier run is cleaned up too.
	if err := p.realNodeDown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("real node: %w", err))
	}
	if _, err := os.Stat(p.ClusterDir()); err == nil {
		p.logf("stopping and deleting the control plane %q", p.ClusterName)
		// kwokctl removes its context from this kubeconfig; it is never created, since
		// `up` does not merge into any kubeconfig.
		if err := p.kwokctl(ctx, "delete", "cluster", "--name", p.ClusterName, "--kubeconfig", filepath.Join(p.StateDir, "unused-kubeconfig")); err != nil {
			errs = append(errs, err)
		}
		// kwokctl signals the servers and returns; a platform started right after must
		// not meet the old apiserver, which serves for a few seconds more while it drains.
		if err := waitPortFree(ctx, p.APIServerPort, 60*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Status reports each component and whether it runs.
func (p *Platform) Status(ctx context.Context) bool {
	ok := true
	report := func(name string, running bool, detail string) {
		state := "running"
		if !running {
			state, ok = "stopped", false
		}
		p.logf("%-24s %-8s %s", name, state, detail)
	}
	// kwokctl runs the control plane and keeps its PID files; its binaries are ours.
	for _, c := range []struct{ name, bin string }{
		{"etcd", "etcd"}, {"kube-apiserver", "kube-apiserver"}, {"kube-controller-manager", "kube-controller-manager"},
		{"kube-scheduler", "kube-scheduler"}, {"kwok-controller", "kwok"},
	} {
		proc := Process{Name: c.name, Path: p.Bin(c.bin), RunDir: filepath.Join(p.ClusterDir(), "pids"), LogsDir: filepath.Join(p.ClusterDir(), "logs")}
		pid, running := proc.Running()
		report(c.name, running, fmt.Sprintf("pid %d, log %s", pid, proc.LogFile()))
	}
	var procs []Process
	switch {
	case p.Install == InstallChart: // JobSet and Kueue run as the chart's pods
		procs = append(procs, p.chartForwards("")...)
	case p.Trainer == TrainerKiln:
		procs = append(p.addonProcesses(), p.TrainerProcess(), p.APIServerProcess())
	default:
		procs = append(p.addonProcesses(), p.TrainerProcess())
	}
	if p.RealNodes > 0 {
		procs = append(procs, p.realNodeProcesses()...)
	}
	for _, proc := range procs {
		pid, running := proc.Running()
		report(proc.Name, running, fmt.Sprintf("pid %d, log %s", pid, proc.LogFile()))
	}
	p.logf("kubeconfig: %s", p.Kubeconfig())
	if ok && !p.apiServerHealthy(ctx) {
		p.logf("kube-apiserver is not ready")
		ok = false
	}
	return ok
}

// NextSteps is what `make up` prints when the platform is ready.
func (p *Platform) NextSteps() string {
	kc := p.Kubeconfig()
	return strings.Join([]string{
		"",
		"The local platform runs on 127.0.0.1. Try:",
		"  export KUBECONFIG=" + kc,
		"  export PATH=" + p.BinDir + ":$PATH",
		"  kubectl get nodes -L nvidia.com/gpu.product,cloud.google.com/gke-spot",
		"  kubectl get clusterqueues,localqueues -A",
		"Real pods run on " + RealNodeName + " (make down stops it; KILN_REAL_NODES=0 leaves it out); a DDP job on it: docs/real-node.md",
		"  kubectl create job hello --image=busybox -- echo hi && kubectl wait --for=condition=Complete job/hello",
		"Kiln's API server is at " + p.KilnAPIURL() + " (h2c: " + fmt.Sprintf("http://127.0.0.1:%d", p.KilnAPIPort) + "), for user " + DemoUser + " in namespace " + DemoNamespace + ":",
		"  export KILN_CONFIG=" + p.ClientConfigFile(),
		"  kiln submit --runtime torch-distributed --nodes 2 --gpus-per-node 8 --queue default --wait -- torchrun train.py",
		"  kiln list",
		"Walk-through: docs/quickstart.md. Stop everything with: make down",
	}, "\n")
}

// waitPortFree waits until nothing accepts connections on 127.0.0.1:port.
func waitPortFree(ctx context.Context, port int, timeout time.Duration) error {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true, nil
		}
		_ = conn.Close()
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s still accepts connections after the control plane was stopped: %w", addr, err)
	}
	return nil
}
