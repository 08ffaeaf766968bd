package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
)

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
	if !p.IsWorker() {
		if err := p.registryUp(ctx); err != nil {
			return err
		}
	}
	if err := p.controlPlaneUp(ctx); err != nil {
		return err
	}
	cs, err := p.clients()
	if err != nil {
		return err
	}
	if err := p.applyPodGroupCRD(ctx, cs); err != nil {
		return err
	}
	if err := p.applyNodes(ctx, cs); err != nil {
		return err
	}
	if p.RealNodes > 0 {
		if err := p.realNode(p.Out).Up(ctx, cs); err != nil {
			return err
		}
	}
	// The chart installs JobSet and Kueue itself, from their own charts.
	if p.Install != InstallChart {
		if err := p.addonsUp(ctx, cs); err != nil {
			return err
		}
	}
	trainerUp := p.kilnUp
	if p.Trainer == TrainerUpstream {
		trainerUp = p.upstream().Up
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
	if p.runsSimTrainer() {
		if err := p.simTrainerUp(); err != nil {
			return err
		}
	}
	if p.Workers > 0 {
		if err := p.workersUp(ctx, cs); err != nil {
			return err
		}
	}
	if p.IsWorker() {
		p.logf("worker %s: up in %s", p.ClusterName, time.Since(start).Round(100*time.Millisecond))
		return nil
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
	_, err = cs.Disco.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
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

func (p *Platform) clients() (*cluster.Clients, error) {
	cfg, err := p.RESTConfig()
	if err != nil {
		return nil, err
	}
	return cluster.New(cfg)
}

// Down stops every process Up started and deletes the cluster's state.
func (p *Platform) Down(ctx context.Context) error {
	errs := []error{p.workersDown(ctx)}
	procs := append([]Process{p.SimTrainerProcess(), p.APIServerProcess(), p.OperatorProcess(), p.UpstreamProcess(), p.RegistryProcess()}, p.chart().Forwards("")...)
	for _, proc := range append(procs, p.addons().Processes()...) {
		if err := proc.StopReporting(p.Out); err != nil {
			errs = append(errs, err)
		}
	}
	// Always, whatever RealNodes says: a node left by an earlier run is cleaned up too
	// (by the manager: workers never have one).
	if !p.IsWorker() {
		if err := p.realNode(p.Out).Down(ctx); err != nil {
			errs = append(errs, fmt.Errorf("real node: %w", err))
		}
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
	// The real node's volumes were the deleted cluster's claims'. (The node's own Down
	// keeps them: `up` restarts a node that crashed under a cluster that still has them.)
	if !p.IsWorker() {
		if err := os.RemoveAll(p.realNode(p.Out).VolumesDir()); err != nil {
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
		procs = append(procs, p.chart().Forwards("")...)
	case p.Trainer == TrainerKiln && !p.WithoutKilnAPIServer:
		procs = append(p.addons().Processes(), p.TrainerProcess(), p.APIServerProcess())
	default:
		procs = append(p.addons().Processes(), p.TrainerProcess())
	}
	if !p.IsWorker() {
		procs = append(procs, p.RegistryProcess())
	}
	if p.runsSimTrainer() {
		procs = append(procs, p.SimTrainerProcess())
	}
	if p.RealNodes > 0 {
		procs = append(procs, p.realNode(p.Out).Processes()...)
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
	for i := 1; i <= p.Workers; i++ {
		w := &Platform{Config: p.Worker(i), Out: p.Out}
		p.logf("--- worker cluster %s", w.ClusterName)
		ok = w.Status(ctx) && ok
	}
	return ok
}

// NextSteps is what `make up` prints when the platform is ready.
func (p *Platform) NextSteps() string {
	steps := []string{
		"",
		"The local platform runs on 127.0.0.1. Try:",
		"  export KUBECONFIG=" + p.Kubeconfig(),
		"  export PATH=" + p.BinDir + ":$PATH",
		"  kubectl get nodes -L nvidia.com/gpu.product,cloud.google.com/gke-spot",
		"  kubectl get clusterqueues,localqueues -A",
	}
	if p.RealNodes > 0 {
		steps = append(steps,
			"Real pods run on "+RealNodeName+" (make down stops it; KILN_REAL_NODES=0 leaves it out); a DDP job on it: docs/real-node.md",
			"  kubectl create job hello --image=busybox -- echo hi && kubectl wait --for=condition=Complete job/hello")
	}
	if p.Workers > 0 {
		steps = append(steps,
			fmt.Sprintf("This cluster is the MultiKueue manager of %d worker clusters: jobs of LocalQueue %s/%s run on them (docs/multicluster.md)", p.Workers, DefaultNamespace, MultiClusterQueue),
			"  kubectl get multikueueclusters",
			fmt.Sprintf("  kubectl --kubeconfig $(kiln-platform kubeconfig %s) get trainjobs,pods", p.WorkerName(1)))
	}
	return strings.Join(append(steps,
		"Kiln's API server is at "+p.KilnAPIURL()+" (h2c: "+fmt.Sprintf("http://127.0.0.1:%d", p.KilnAPIPort)+"), for user "+DemoUser+" in namespace "+DemoNamespace+":",
		"  export KILN_CONFIG="+p.ClientConfigFile(),
		"  kiln submit --runtime torch-distributed --nodes 2 --gpus-per-node 8 --queue default --wait -- torchrun train.py",
		"  kiln list",
		fmt.Sprintf("Its web console: http://127.0.0.1:%d/ (sign in with the token in %s; docs/console.md)", p.KilnAPIPort, p.ClientConfigFile()),
		"Walk-through: docs/quickstart.md. Stop everything with: make down",
	), "\n")
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
