// Package platform runs Kiln's local Kubernetes platform: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler through kwokctl's binary runtime, KWOK nodes
// that run pods to completion, and the JobSet and Kueue controllers as local processes
// whose webhooks the apiserver reaches at https://127.0.0.1. Everything it writes stays
// under the repository's bin/ directory; everything listens on 127.0.0.1.
//
// Up, Down and Status are the list of steps; the components beside the control plane are
// packages of their own, each given the paths and settings it needs: realnode (the real
// node and its host changes), addons (JobSet and Kueue as processes), chart (the Helm
// install) and upstream (upstream Kubeflow Trainer).
package platform

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kiln-ml/kiln/e2e/internal/platform/pki"
	"github.com/kiln-ml/kiln/e2e/internal/platform/realnode"
)

// Config says where the platform's binaries and state live and how it is shaped.
type Config struct {
	// Root is the repository.
	Root string
	// BinDir holds the pinned binaries (bin/ in the repository).
	BinDir string
	// StateDir holds the cluster's state, certificates, PID files and logs (bin/platform).
	StateDir string
	// ClusterName is the kwokctl cluster name.
	ClusterName string

	APIServerPort   int
	JobSetWebhook   int
	JobSetHealth    int
	KueueWebhook    int
	KueueHealth     int
	OperatorHealth  int
	OperatorWebhook int
	OperatorMetrics int
	// OperatorPprof serves the operator's Go profiles (/debug/pprof) on 127.0.0.1.
	OperatorPprof int
	// OperatorStatus is the operator's status server (trainers report progress there), on
	// 127.0.0.1 and, through a forward, on the real node's address for its pods.
	OperatorStatus int
	KilnAPIPort    int
	KilnAPITLSPort int
	// KilnAPIPprof serves the API server's Go profiles (/debug/pprof) on 127.0.0.1.
	KilnAPIPprof int
	// OTLPPort is where the operator and the API server export their traces (OTLP/HTTP on
	// 127.0.0.1): run a collector or Jaeger there to see them; the tracing spec listens there.
	OTLPPort int
	// RegistryPort is where the platform's OCI registry serves HTTPS on 127.0.0.1.
	RegistryPort int
	GPUNodes     int
	// RealNodes is how many real nodes run beside the KWOK fleet: 1 (kiln-node-0, a
	// kubelet with containerd on this machine) or 0.
	RealNodes   int
	GPUsPerNode int
	SpotNodes   int
	// TASBlocks × TASRacksPerBlock × TASNodesPerRack GPU nodes form the topology-aware pool
	// (Kueue's TAS: blocks and racks labelled as GKE labels them), apart from the others.
	TASBlocks        int
	TASRacksPerBlock int
	TASNodesPerRack  int
	PodsPerNode      int
	NodeCPU          string
	NodeMemory       string
	GPUProduct       string
	PodRunDuration   time.Duration
	ComponentTimeout time.Duration

	// Install is how Kiln runs: local processes, or the Helm chart's pods on the real node.
	Install Install
	// ChartFrom, with Install chart, is a release's directory (make release: its chart
	// package and images) to install in place of this clone's chart and images: the
	// release an upgrade starts from (make test-upgrade).
	ChartFrom string
	// Trainer is the TrainJob controller to run: Kiln's operator, or upstream Kubeflow
	// Trainer for side-by-side benchmarks.
	Trainer Trainer
	// Controller is the client budget and parallelism the TrainJob controller gets,
	// whichever it is.
	Controller ControllerBudget
	// WithoutKilnAPIServer leaves Kiln's API server out of the platform (the benchmarks of
	// the controllers, whose other platform has none).
	WithoutKilnAPIServer bool
	// WithoutTracing exports no traces (the benchmarks: they measure the controllers alone).
	WithoutTracing bool
	// SimulatedProgress runs the simulated trainer (simtrainer.go), which reports progress
	// for KWOK's pods; off for the benchmarks, whose writes it would add to.
	SimulatedProgress bool
	// Workers is how many worker clusters run beside this one, which is then their
	// MultiKueue manager (multicluster.go).
	Workers int
	// ManagerName is, for a worker cluster, its manager's cluster name.
	ManagerName string
	// AuditNamespaces makes the apiserver log every write request in these namespaces (who,
	// what, the answer) to AuditLogFile, for telling apart which component wrote what.
	// None by default: logging costs the apiserver time.
	AuditNamespaces []string
}

// ControllerBudget is a controller's Kubernetes client rate limit and parallelism.
type ControllerBudget struct {
	QPS         float64
	Burst       int
	Concurrency int
}

// Install is how Kiln's operator and API server run on the local platform.
type Install string

const (
	// InstallProcesses runs them as local processes (fast to iterate on).
	InstallProcesses Install = "processes"
	// InstallChart installs the Helm chart charts/kiln: they run as pods on the real node,
	// from the images of `make images`, their webhooks reached through their Service.
	InstallChart Install = "chart"

	// EnvInstall selects the Install.
	EnvInstall = "KILN_INSTALL"
	// EnvChartFrom sets ChartFrom.
	EnvChartFrom = "KILN_CHART_FROM"
)

// Environment variables that resize or re-port the platform; defaults in DefaultConfig.
const (
	EnvGPUNodes       = "KILN_GPU_NODES"
	EnvSpotNodes      = "KILN_SPOT_NODES"
	EnvTASBlocks      = "KILN_TAS_BLOCKS"
	EnvTASRacks       = "KILN_TAS_RACKS_PER_BLOCK"
	EnvTASNodes       = "KILN_TAS_NODES_PER_RACK"
	EnvGPUsPerNode    = "KILN_GPUS_PER_NODE"
	EnvPodsPerNode    = "KILN_PODS_PER_NODE"
	EnvNodeCPU        = "KILN_NODE_CPU"
	EnvNodeMemory     = "KILN_NODE_MEMORY"
	EnvPodRunDuration = "KILN_POD_RUN_DURATION"
	EnvAPIServerPort  = "KILN_APISERVER_PORT"
	EnvTrainer        = "KILN_TRAINER"
	EnvRealNodes      = "KILN_REAL_NODES"
)

// DefaultConfig is the documented platform: 4 GPU nodes, 2 spot nodes and a topology-aware
// pool of 2 blocks × 2 racks × 4 nodes, of 32 CPUs, 256Gi and 8 GPUs each, pods that run for 2 seconds unless annotated otherwise.
func DefaultConfig(root string) Config {
	bin := filepath.Join(root, "bin")
	return Config{
		Root:              root,
		BinDir:            bin,
		StateDir:          filepath.Join(bin, "platform"),
		ClusterName:       "kiln",
		APIServerPort:     16443,
		JobSetWebhook:     19443,
		JobSetHealth:      18081,
		KueueWebhook:      19444,
		KueueHealth:       18082,
		OperatorHealth:    18084,
		OperatorWebhook:   19445,
		OperatorMetrics:   18085,
		OperatorPprof:     18086,
		OperatorStatus:    19446,
		KilnAPIPort:       18090,
		KilnAPITLSPort:    18443,
		KilnAPIPprof:      18087,
		OTLPPort:          18318,
		RegistryPort:      18500,
		GPUNodes:          4,
		RealNodes:         1,
		GPUsPerNode:       8,
		SpotNodes:         2,
		TASBlocks:         2,
		TASRacksPerBlock:  2,
		TASNodesPerRack:   4,
		PodsPerNode:       110,
		NodeCPU:           "32",
		NodeMemory:        "256Gi",
		GPUProduct:        "NVIDIA-H100-80GB-HBM3",
		PodRunDuration:    2 * time.Second,
		ComponentTimeout:  90 * time.Second,
		Trainer:           TrainerKiln,
		Install:           InstallProcesses,
		SimulatedProgress: true,
		Controller:        ControllerBudget{QPS: 50, Burst: 100, Concurrency: 32},
	}
}

// FromEnv applies the KILN_* overrides and reports the first malformed one.
func (c Config) FromEnv() (Config, error) {
	ints := map[string]*int{
		EnvGPUNodes: &c.GPUNodes, EnvSpotNodes: &c.SpotNodes, EnvGPUsPerNode: &c.GPUsPerNode, EnvAPIServerPort: &c.APIServerPort, EnvPodsPerNode: &c.PodsPerNode,
		EnvRealNodes: &c.RealNodes, EnvWorkers: &c.Workers, EnvTASBlocks: &c.TASBlocks, EnvTASRacks: &c.TASRacksPerBlock, EnvTASNodes: &c.TASNodesPerRack,
	}
	for name, dst := range ints {
		if v, ok := os.LookupEnv(name); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return c, fmt.Errorf("%s=%q: want a non-negative integer", name, v)
			}
			*dst = n
		}
	}
	if c.RealNodes > 1 {
		return c, fmt.Errorf("%s=%d: want 0 or 1 (one machine runs one kubelet)", EnvRealNodes, c.RealNodes)
	}
	if c.Workers > maxWorkers {
		return c, fmt.Errorf("%s=%d: at most %d worker clusters", EnvWorkers, c.Workers, maxWorkers)
	}
	if v, ok := os.LookupEnv(EnvNodeCPU); ok {
		c.NodeCPU = v
	}
	if v, ok := os.LookupEnv(EnvNodeMemory); ok {
		c.NodeMemory = v
	}
	if err := lookupEnum(EnvTrainer, &c.Trainer, TrainerKiln, TrainerUpstream); err != nil {
		return c, err
	}
	if err := lookupEnum(EnvInstall, &c.Install, InstallProcesses, InstallChart); err != nil {
		return c, err
	}
	if v := os.Getenv(EnvChartFrom); v != "" {
		if c.Install != InstallChart {
			return c, fmt.Errorf("%s=%s installs a release by its chart: set %s=%s too", EnvChartFrom, v, EnvInstall, InstallChart)
		}
		if _, err := os.Stat(filepath.Join(v, "SHA256SUMS")); err != nil {
			return c, fmt.Errorf("%s=%s: not a release directory (make release writes one, with its SHA256SUMS): %w", EnvChartFrom, v, err)
		}
		c.ChartFrom = v
	}
	if c.Workers > 0 && c.Install == InstallChart {
		return c, fmt.Errorf("%s=%d: worker clusters run with %s=%s only (the chart's manager mode: docs/multicluster.md)", EnvWorkers, c.Workers, EnvInstall, InstallProcesses)
	}
	if v, ok := os.LookupEnv(EnvPodRunDuration); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return c, fmt.Errorf("%s=%q: want a duration such as 2s or 1m", EnvPodRunDuration, v)
		}
		c.PodRunDuration = d
	}
	switch v := os.Getenv(EnvSimulatedProgress); v {
	case "", "1":
	case "0":
		c.SimulatedProgress = false
	default:
		return c, fmt.Errorf("%s=%q: want 1 (KWOK pods report progress) or 0 (they do not)", EnvSimulatedProgress, v)
	}
	return c, nil
}

// lookupEnum sets *dst from the environment variable name when it is set to one of allowed.
func lookupEnum[T ~string](name string, dst *T, allowed ...T) error {
	v, ok := os.LookupEnv(name)
	if !ok {
		return nil
	}
	for _, a := range allowed {
		if T(v) == a {
			*dst = a
			return nil
		}
	}
	return fmt.Errorf("%s=%q: want one of %q", name, v, allowed)
}

// Bin is the path of a pinned binary.
func (c Config) Bin(name string) string { return filepath.Join(c.BinDir, name) }

// KwokWorkdir is KWOK_WORKDIR for kwokctl.
func (c Config) KwokWorkdir() string { return filepath.Join(c.StateDir, "kwok") }

// ClusterDir is where kwokctl keeps this cluster's files.
func (c Config) ClusterDir() string { return filepath.Join(c.KwokWorkdir(), "clusters", c.ClusterName) }

// Kubeconfig is the admin kubeconfig of the local cluster.
func (c Config) Kubeconfig() string { return filepath.Join(c.ClusterDir(), "kubeconfig.yaml") }

// PKI is the harness's certificate authority for local webhooks.
// Its serving certificate also names the real node's address, where that node's pods reach
// the operator's status server.
func (c Config) PKI() pki.PKI {
	return pki.PKI{Dir: filepath.Join(c.StateDir, "pki"), IPs: []net.IP{net.ParseIP(realnode.NodeIP)}}
}

// RunDir holds PID files of the processes the harness starts itself.
func (c Config) RunDir() string { return filepath.Join(c.StateDir, "run") }

// LogsDir holds the logs of the processes the harness starts itself.
func (c Config) LogsDir() string { return filepath.Join(c.StateDir, "logs") }

// AuditLogFile is the apiserver's audit log, written when AuditNamespaces names any.
func (c Config) AuditLogFile() string { return filepath.Join(c.ClusterDir(), "logs", "audit.log") }

// ConfigDir holds the generated component configuration files.
func (c Config) ConfigDir() string { return filepath.Join(c.StateDir, "config") }

// ManifestsDir holds the JobSet and Kueue releases rendered from their pinned modules.
func (c Config) ManifestsDir() string { return filepath.Join(c.BinDir, "manifests") }

// OTLPEnv configures a Kiln process to export its traces to OTLPPort, flushing every
// 200 ms (the default 5 s would make a trace slow to complete in the tests).
func (c Config) OTLPEnv() []string {
	if c.WithoutTracing {
		return nil
	}
	return []string{fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", c.OTLPPort), "OTEL_BSP_SCHEDULE_DELAY=200"}
}
