package platform

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"sigs.k8s.io/yaml"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
)

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

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

type addon struct {
	name      string
	manifests string
	local     Addon
	health    int
	process   Process
	config    map[string]any
}

func (p *Platform) addons() []addon {
	serving := p.PKI().ServingDir()
	jobset := addon{
		name:      "jobset",
		manifests: filepath.Join(p.ManifestsDir(), "jobset.yaml"),
		// JobSet's CRD has one version: it needs no conversion webhook.
		local:  Addon{WebhookPort: p.JobSetWebhook},
		health: p.JobSetHealth,
		config: map[string]any{
			"apiVersion":             "config.jobset.x-k8s.io/v1alpha1",
			"kind":                   "Configuration",
			"leaderElection":         map[string]any{"leaderElect": false},
			"internalCertManagement": map[string]any{"enable": false},
			"webhook":                map[string]any{"host": "127.0.0.1", "port": p.JobSetWebhook, "certDir": serving},
			"metrics":                map[string]any{"bindAddress": "0"},
			"health":                 map[string]any{"healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", p.JobSetHealth)},
		},
	}
	kueue := addon{
		name:      "kueue",
		manifests: filepath.Join(p.ManifestsDir(), "kueue.yaml"),
		local: Addon{
			WebhookPort:    p.KueueWebhook,
			KeepConversion: kueueConversionCRDs,
			// Only the integrations enabled below, plus Kueue's own kinds: a webhook for
			// every Pod or Deployment would make Kueue a failure point for all of them.
			WebhookGroups: []string{"kueue.x-k8s.io", "batch", "jobset.x-k8s.io", "trainer.kubeflow.org"},
		},
		health: p.KueueHealth,
		config: map[string]any{
			"apiVersion":             "config.kueue.x-k8s.io/v1beta2",
			"kind":                   "Configuration",
			"namespace":              "kueue-system",
			"leaderElection":         map[string]any{"leaderElect": false},
			"internalCertManagement": map[string]any{"enable": false},
			"webhook":                map[string]any{"host": "127.0.0.1", "port": p.KueueWebhook, "certDir": serving},
			"metrics":                map[string]any{"bindAddress": "0"},
			"health":                 map[string]any{"healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", p.KueueHealth)},
			"integrations":           map[string]any{"frameworks": KueueFrameworks},
			// The visibility API is an aggregated API server that needs an in-cluster Service.
			"featureGates": map[string]any{"VisibilityOnDemand": false},
		},
	}
	for _, a := range []*addon{&jobset, &kueue} {
		cfgPath := filepath.Join(p.ConfigDir(), a.name+".yaml")
		a.process = Process{
			Name:    a.name,
			Path:    p.Bin(a.name),
			Args:    []string{"--config=" + cfgPath, "--kubeconfig=" + p.Kubeconfig(), "--zap-log-level=2"},
			RunDir:  p.RunDir(),
			LogsDir: p.LogsDir(),
		}
	}
	kueue.process = p.withKueueMetricsCerts(kueue.process)
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

func (p *Platform) withKueueMetricsCerts(proc Process) Process {
	if _, err := os.Stat(filepath.Join(kueueMetricsCerts, "tls.crt")); err == nil {
		return proc // provided by the host
	}
	scratch := filepath.Join(p.StateDir, "kueue-etc")
	args := append([]string{"-m", "--propagation", "private", "/bin/sh", "-c", privateEtcScript, "kueue-etc", scratch, p.PKI().ServingDir(), proc.Path}, proc.Args...)
	proc.Exe = proc.Path
	proc.Path = "/usr/bin/unshare"
	proc.Args = args
	return proc
}

func (p *Platform) addonProcesses() []Process {
	var procs []Process
	for _, a := range p.addons() {
		procs = append(procs, a.process)
	}
	return procs
}

func (p *Platform) addonsUp(ctx context.Context, cs *clientSet) error {
	caBundle, err := p.PKI().CABundle()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(p.StateDir, "kueue-etc"), 0o755); err != nil {
		return err
	}
	addons := p.addons()
	// Install every CRD and webhook first: Kueue's TrainJob integration needs the JobSet CRD.
	for _, a := range addons {
		objs, err := kilntesting.ReadManifests(a.manifests)
		if err != nil {
			return fmt.Errorf("%s (run `make tools`): %w", a.name, err)
		}
		local, err := a.local.Localize(objs, caBundle)
		if err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		if err := cs.apply(ctx, local...); err != nil {
			return fmt.Errorf("installing %s: %w", a.name, err)
		}
		if err := cs.waitCRDsEstablished(ctx, local); err != nil {
			return fmt.Errorf("installing %s: %w", a.name, err)
		}
	}
	// Kueue sets up its TrainJob integration once the TrainJob CRD exists; it polls with a
	// growing backoff, so the CRDs go in before Kueue starts.
	applyCRDs := p.applyKilnCRDs
	if p.Trainer == TrainerUpstream {
		applyCRDs = p.applyUpstreamCRDs
	}
	if err := applyCRDs(ctx, cs); err != nil {
		return err
	}
	return p.startAddons(ctx, addons)
}

// startAddons starts JobSet and Kueue unless they run, and waits until both are ready.
func (p *Platform) startAddons(ctx context.Context, addons []addon) error {
	kueueKubeconfig, err := p.kueueKubeconfig(ctx)
	if err != nil {
		return err
	}
	for _, a := range addons {
		if a.name == "kueue" {
			for i, arg := range a.process.Args {
				if arg == "--kubeconfig="+p.Kubeconfig() {
					a.process.Args[i] = "--kubeconfig=" + kueueKubeconfig
				}
			}
		}
		if pid, running := a.process.Running(); running {
			p.logf("%s: already running (pid %d)", a.name, pid)
			continue
		}
		data, err := yaml.Marshal(a.config)
		if err != nil {
			return fmt.Errorf("encoding %s configuration: %w", a.name, err)
		}
		if err := os.WriteFile(filepath.Join(p.ConfigDir(), a.name+".yaml"), data, 0o644); err != nil {
			return fmt.Errorf("writing %s configuration: %w", a.name, err)
		}
		if err := a.process.Start(); err != nil {
			return err
		}
		p.logf("%s: started, webhooks at https://127.0.0.1:%d (log %s)", a.name, a.local.WebhookPort, a.process.LogFile())
	}
	for _, a := range addons {
		if err := p.waitAddonReady(ctx, a); err != nil {
			return fmt.Errorf("%s did not become ready: %w\n--- %s (last 30 lines)\n%s", a.name, err, a.process.LogFile(), Tail(a.process.LogFile(), 30))
		}
	}
	return nil
}

// waitAddonReady waits for the readiness endpoint and the webhook server, and fails fast
// when the process exits.
func (p *Platform) waitAddonReady(ctx context.Context, a addon) error {
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", a.health)
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, p.ComponentTimeout, true, func(ctx context.Context) (bool, error) {
		if _, running := a.process.Running(); !running {
			if a.process.alive() {
				return false, nil // still in its wrapper, on the way to exec
			}
			return false, fmt.Errorf("%s exited", a.name)
		}
		return httpOK(ctx, readyz) && tlsListening(ctx, a.local.WebhookPort), nil
	})
}
