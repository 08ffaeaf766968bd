// Package addons runs JobSet and Kueue as local processes: their releases' CRDs and
// webhooks installed and pointed at https://127.0.0.1, each controller configured to serve
// there with the platform's certificate.
package addons

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
	"github.com/kiln-ml/kiln/e2e/internal/platform/manifests"
	"github.com/kiln-ml/kiln/e2e/internal/platform/pki"
	"github.com/kiln-ml/kiln/e2e/internal/platform/probe"
	"github.com/kiln-ml/kiln/e2e/internal/platform/process"
)

// Kueue's CRDs that serve v1beta1 and v1beta2 through its conversion webhook.
var kueueConversionCRDs = []string{
	"clusterqueues.kueue.x-k8s.io",
	"cohorts.kueue.x-k8s.io",
	"localqueues.kueue.x-k8s.io",
	"multikueueclusters.kueue.x-k8s.io",
	"workloads.kueue.x-k8s.io",
}

// KueueFrameworks are the Kueue integrations the platform enables.
var KueueFrameworks = []string{"batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"}

// KueueConcurrency is how many objects of each kind Kueue reconciles at once: the chart's
// configuration (charts/kiln/values.yaml).
var KueueConcurrency = map[string]int{
	"TrainJob.trainer.kubeflow.org": 5, "JobSet.jobset.x-k8s.io": 5, "Job.batch": 5,
	"Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5, "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1,
}

// KueueUser is the identity Kueue runs as, the one its in-cluster ServiceAccount has, so
// that the operator can tell Kueue's writes apart as it does in a cluster.
const KueueUser = "system:serviceaccount:kueue-system:kueue-controller-manager"

// Controllers are JobSet's and Kueue's controllers on the local platform.
type Controllers struct {
	// BinDir holds the jobset and kueue binaries.
	BinDir string
	// ManifestsDir holds their releases rendered from the pinned modules.
	ManifestsDir string
	// ConfigDir holds their generated configuration and Kueue's kubeconfig.
	ConfigDir string
	// StateDir holds Kueue's private /etc (see withKueueMetricsCerts).
	StateDir string
	// Kubeconfig is the admin kubeconfig of the cluster.
	Kubeconfig string
	// RunDir and LogsDir hold their PID files and logs.
	RunDir, LogsDir string
	PKI             pki.PKI

	JobSetWebhook, JobSetHealth int
	KueueWebhook, KueueHealth   int
	// Timeout bounds the wait until each is ready.
	Timeout time.Duration
	// IssueKubeconfig returns a kubeconfig for a user in a group (kwokctl get kubeconfig).
	IssueKubeconfig func(ctx context.Context, user, group string) ([]byte, error)
	// MultiKueue is Kueue's multiKueue configuration on a MultiKueue manager (nil: none).
	MultiKueue map[string]any

	Out io.Writer
}

type addon struct {
	name      string
	manifests string
	local     manifests.Addon
	health    int
	process   process.Process
	config    map[string]any
}

func (c Controllers) addons() []addon {
	serving := c.PKI.ServingDir()
	jobset := addon{
		name:      "jobset",
		manifests: filepath.Join(c.ManifestsDir, "jobset.yaml"),
		// JobSet's CRD has one version: it needs no conversion webhook.
		local:  manifests.Addon{WebhookPort: c.JobSetWebhook},
		health: c.JobSetHealth,
		config: map[string]any{
			"apiVersion":             "config.jobset.x-k8s.io/v1alpha1",
			"kind":                   "Configuration",
			"leaderElection":         map[string]any{"leaderElect": false},
			"internalCertManagement": map[string]any{"enable": false},
			"webhook":                map[string]any{"host": "127.0.0.1", "port": c.JobSetWebhook, "certDir": serving},
			"metrics":                map[string]any{"bindAddress": "0"},
			"health":                 map[string]any{"healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", c.JobSetHealth)},
		},
	}
	kueue := addon{
		name:      "kueue",
		manifests: filepath.Join(c.ManifestsDir, "kueue.yaml"),
		local: manifests.Addon{
			WebhookPort:    c.KueueWebhook,
			KeepConversion: kueueConversionCRDs,
			// Only the integrations enabled below, plus Kueue's own kinds: a webhook for
			// every Pod or Deployment would make Kueue a failure point for all of them.
			WebhookGroups: []string{"kueue.x-k8s.io", "batch", "jobset.x-k8s.io", "trainer.kubeflow.org"},
		},
		health: c.KueueHealth,
		config: map[string]any{
			"apiVersion":             "config.kueue.x-k8s.io/v1beta2",
			"kind":                   "Configuration",
			"namespace":              "kueue-system",
			"leaderElection":         map[string]any{"leaderElect": false},
			"internalCertManagement": map[string]any{"enable": false},
			"webhook":                map[string]any{"host": "127.0.0.1", "port": c.KueueWebhook, "certDir": serving},
			"metrics":                map[string]any{"bindAddress": "0"},
			"health":                 map[string]any{"healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", c.KueueHealth)},
			"integrations":           map[string]any{"frameworks": KueueFrameworks},
			// As the chart's (charts/kiln/values.yaml): Kueue's TrainJob and JobSet
			// reconcilers default to one worker each.
			"controller": map[string]any{"groupKindConcurrency": KueueConcurrency},
			// The visibility API is an aggregated API server that needs an in-cluster Service.
			"featureGates": map[string]any{"VisibilityOnDemand": false},
		},
	}
	if c.MultiKueue != nil {
		kueue.config["multiKueue"] = c.MultiKueue
	}
	for _, a := range []*addon{&jobset, &kueue} {
		cfgPath := filepath.Join(c.ConfigDir, a.name+".yaml")
		a.process = process.Process{
			Name:    a.name,
			Path:    filepath.Join(c.BinDir, a.name),
			Args:    []string{"--config=" + cfgPath, "--kubeconfig=" + c.Kubeconfig, "--zap-log-level=2"},
			RunDir:  c.RunDir,
			LogsDir: c.LogsDir,
		}
	}
	kueue.process = c.withKueueMetricsCerts(kueue.process)
	return []addon{jobset, kueue}
}

// kueueMetricsCerts is the fixed path at which Kueue v0.19 reads its metrics serving
// certificate when its internal certificate management is off (cmd/kueue/main.go); there
// is no flag for it. The process gets a private mount namespace in which /etc is an
// overlay holding the certificate, so the host's /etc is never written.
const kueueMetricsCerts = "/etc/kueue/metrics/certs"

const privateEtcScript = `set -e
scratch=$1 certs=$2; shift 2
mount -t tmpfs kiln-kueue-etc "$scratch"
mkdir -p "$scratch/upper" "$scratch/work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$scratch/upper,workdir=$scratch/work" /etc
mkdir -p ` + kueueMetricsCerts + `
cp "$certs/tls.crt" "$certs/tls.key" ` + kueueMetricsCerts + `/
exec "$@"
`

func (c Controllers) withKueueMetricsCerts(proc process.Process) process.Process {
	if _, err := os.Stat(filepath.Join(kueueMetricsCerts, "tls.crt")); err == nil {
		return proc // provided by the host
	}
	scratch := filepath.Join(c.StateDir, "kueue-etc")
	args := append([]string{"-m", "--propagation", "private", "/bin/sh", "-c", privateEtcScript, "kueue-etc", scratch, c.PKI.ServingDir(), proc.Path}, proc.Args...)
	proc.Exe = proc.Path
	proc.Path = "/usr/bin/unshare"
	proc.Args = args
	return proc
}

// Processes are JobSet's and Kueue's processes.
func (c Controllers) Processes() []process.Process {
	var procs []process.Process
	for _, a := range c.addons() {
		procs = append(procs, a.process)
	}
	return procs
}

// Install installs JobSet's and Kueue's CRDs and webhooks, pointed at the local processes.
// Kueue's TrainJob integration needs the TrainJob CRD too: install it before Start.
func (c Controllers) Install(ctx context.Context, cs *cluster.Clients) error {
	caBundle, err := c.PKI.CABundle()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(c.StateDir, "kueue-etc"), 0o755); err != nil {
		return err
	}
	// Install every CRD and webhook first: Kueue's TrainJob integration needs the JobSet CRD.
	for _, a := range c.addons() {
		objs, err := kilntesting.ReadManifests(a.manifests)
		if err != nil {
			return fmt.Errorf("%s (run `make tools`): %w", a.name, err)
		}
		local, err := a.local.Localize(objs, caBundle)
		if err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		if err := cs.Apply(ctx, local...); err != nil {
			return fmt.Errorf("installing %s: %w", a.name, err)
		}
		if err := cs.WaitCRDsEstablished(ctx, local); err != nil {
			return fmt.Errorf("installing %s: %w", a.name, err)
		}
	}
	return nil
}

// Start starts JobSet and Kueue unless they run, and waits until both are ready.
func (c Controllers) Start(ctx context.Context) error {
	addons := c.addons()
	kueueKubeconfig, err := c.kueueKubeconfig(ctx)
	if err != nil {
		return err
	}
	for _, a := range addons {
		if a.name == "kueue" {
			for i, arg := range a.process.Args {
				if arg == "--kubeconfig="+c.Kubeconfig {
					a.process.Args[i] = "--kubeconfig=" + kueueKubeconfig
				}
			}
		}
		if pid, running := a.process.Running(); running {
			fmt.Fprintf(c.Out, "%s: already running (pid %d)\n", a.name, pid)
			continue
		}
		data, err := yaml.Marshal(a.config)
		if err != nil {
			return fmt.Errorf("encoding %s configuration: %w", a.name, err)
		}
		if err := os.WriteFile(filepath.Join(c.ConfigDir, a.name+".yaml"), data, 0o644); err != nil {
			return fmt.Errorf("writing %s configuration: %w", a.name, err)
		}
		if err := a.process.Start(); err != nil {
			return err
		}
		fmt.Fprintf(c.Out, "%s: started, webhooks at https://127.0.0.1:%d (log %s)\n", a.name, a.local.WebhookPort, a.process.LogFile())
	}
	for _, a := range addons {
		if err := c.waitReady(ctx, a); err != nil {
			return fmt.Errorf("%s did not become ready: %w\n--- %s (last 30 lines)\n%s", a.name, err, a.process.LogFile(), process.Tail(a.process.LogFile(), 30))
		}
	}
	return nil
}

// waitReady waits for the readiness endpoint and the webhook server, and fails fast
// when the process exits.
func (c Controllers) waitReady(ctx context.Context, a addon) error {
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", a.health)
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, c.Timeout, true, func(ctx context.Context) (bool, error) {
		if _, running := a.process.Running(); !running {
			if a.process.Alive() {
				return false, nil // still in its wrapper, on the way to exec
			}
			return false, fmt.Errorf("%s exited", a.name)
		}
		return probe.HTTPOK(ctx, readyz) && probe.TLSListening(ctx, a.local.WebhookPort), nil
	})
}

// kueueKubeconfig issues a client certificate for KueueUser (in system:masters, as the
// local platform does not install Kueue's RBAC) and writes its kubeconfig.
func (c Controllers) kueueKubeconfig(ctx context.Context) (string, error) {
	out, err := c.IssueKubeconfig(ctx, KueueUser, "system:masters")
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.ConfigDir, "kueue.kubeconfig")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return "", fmt.Errorf("writing Kueue's kubeconfig: %w", err)
	}
	return path, nil
}
