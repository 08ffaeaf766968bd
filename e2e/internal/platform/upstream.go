package platform

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
)

// Trainer names the TrainJob controller a platform runs.
type Trainer string

const (
	// TrainerKiln is Kiln's operator with Kiln's CRDs and runtime catalog (the default).
	TrainerKiln Trainer = "kiln"
	// TrainerUpstream is Kubeflow Trainer v2.3.0's controller manager, built from
	// tools/trainer, with its own CRDs, webhooks and runtimes: the benchmarks' baseline.
	TrainerUpstream Trainer = "upstream"
)

// upstreamManifests is rendered from the pinned Kubeflow Trainer module by the Makefile:
// its CRDs, webhook configurations and ClusterTrainingRuntimes.
const upstreamManifests = "trainer.yaml"

// UpstreamProcess is upstream Kubeflow Trainer's controller manager as a local process.
func (p *Platform) UpstreamProcess() Process {
	dir := p.upstreamDir()
	return Process{
		Name: "trainer-controller-manager",
		Path: p.Bin("trainer-controller-manager"),
		Args: []string{"--config=" + filepath.Join(dir, "config.yaml"), "--kubeconfig=" + p.Kubeconfig(), "--zap-log-level=2"},
		// controller-runtime's webhook server reads its certificate from
		// $TMPDIR/k8s-webhook-server/serving-certs when certificate management is off.
		Env:     []string{"TMPDIR=" + filepath.Join(dir, "tmp")},
		RunDir:  p.RunDir(),
		LogsDir: p.LogsDir(),
	}
}

func (c Config) upstreamDir() string { return filepath.Join(c.StateDir, "upstream-trainer") }

// TrainerProcess is the TrainJob controller the platform runs.
func (p *Platform) TrainerProcess() Process {
	if p.Trainer == TrainerUpstream {
		return p.UpstreamProcess()
	}
	return p.OperatorProcess()
}

// RestartTrainer stops the TrainJob controller and starts it again with another client
// budget; its webhooks answer again once it is ready. Nothing may create or change
// TrainJobs in between.
func (p *Platform) RestartTrainer(ctx context.Context, budget ControllerBudget) error {
	if err := p.TrainerProcess().Stop(30 * time.Second); err != nil {
		return err
	}
	p.Controller = budget
	if p.Trainer == TrainerUpstream {
		if err := os.WriteFile(filepath.Join(p.upstreamDir(), "config.yaml"), []byte(p.upstreamConfig()), 0o644); err != nil {
			return err
		}
	}
	return p.startReady(ctx, p.TrainerProcess(), fmt.Sprintf("http://127.0.0.1:%d/readyz", p.OperatorHealth))
}

// upstreamConfig is upstream's Configuration with the same client budget and
// concurrency as Kiln's operator gets, every listener on 127.0.0.1, and no leader
// election or certificate management (the harness issues the serving certificate).
func (p *Platform) upstreamConfig() string {
	return fmt.Sprintf(`apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:%d
  readinessEndpointName: readyz
  livenessEndpointName: healthz
metrics:
  bindAddress: 127.0.0.1:%d
  secureServing: false
webhook:
  host: 127.0.0.1
  port: %d
leaderElection:
  leaderElect: false
controller:
  groupKindConcurrency:
    TrainJob.trainer.kubeflow.org: %d
    TrainingRuntime.trainer.kubeflow.org: 1
    ClusterTrainingRuntime.trainer.kubeflow.org: 1
certManagement:
  enable: false
clientConnection:
  qps: %g
  burst: %d
`, p.OperatorHealth, p.OperatorMetrics, p.OperatorWebhook, p.Controller.Concurrency, p.Controller.QPS, p.Controller.Burst)
}

func (p *Platform) upstreamObjects() ([]*unstructured.Unstructured, error) {
	path := filepath.Join(p.ManifestsDir(), upstreamManifests)
	objs, err := kilntesting.ReadManifests(path)
	if err != nil {
		return nil, fmt.Errorf("upstream Kubeflow Trainer manifests (make %s): %w", path, err)
	}
	return objs, nil
}

// applyUpstreamCRDs installs upstream Kubeflow Trainer's own CRDs.
func (p *Platform) applyUpstreamCRDs(ctx context.Context, cs *clientSet) error {
	objs, err := p.upstreamObjects()
	if err != nil {
		return err
	}
	crds := kinds(objs, "CustomResourceDefinition")
	if err := cs.apply(ctx, crds...); err != nil {
		return fmt.Errorf("installing upstream Kubeflow Trainer's CRDs: %w", err)
	}
	return cs.waitCRDsEstablished(ctx, crds)
}

// upstreamUp starts upstream's controller manager, registers its webhooks at its local
// address and installs its ClusterTrainingRuntimes.
func (p *Platform) upstreamUp(ctx context.Context, cs *clientSet) error {
	proc := p.UpstreamProcess()
	certs := filepath.Join(p.upstreamDir(), "tmp", "k8s-webhook-server")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		return err
	}
	link := filepath.Join(certs, "serving-certs")
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(p.PKI().ServingDir(), link); err != nil {
			return fmt.Errorf("linking the serving certificate for upstream Kubeflow Trainer: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(p.upstreamDir(), "config.yaml"), []byte(p.upstreamConfig()), 0o644); err != nil {
		return err
	}
	if err := p.startReady(ctx, proc, fmt.Sprintf("http://127.0.0.1:%d/readyz", p.OperatorHealth)); err != nil {
		return err
	}
	objs, err := p.upstreamObjects()
	if err != nil {
		return err
	}
	caBundle, err := p.PKI().CABundle()
	if err != nil {
		return err
	}
	hooks, err := Addon{WebhookPort: p.OperatorWebhook}.Localize(kinds(objs, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"), caBundle)
	if err != nil {
		return err
	}
	for _, h := range hooks {
		h.SetName("upstream-trainer-" + h.GetName())
	}
	if err := cs.apply(ctx, hooks...); err != nil {
		return fmt.Errorf("registering upstream Kubeflow Trainer's webhooks: %w", err)
	}
	rts := kinds(objs, "ClusterTrainingRuntime")
	if err := cs.apply(ctx, rts...); err != nil {
		return fmt.Errorf("installing upstream Kubeflow Trainer's runtimes: %w", err)
	}
	p.logf("upstream Kubeflow Trainer: CRDs, controller manager and %d ClusterTrainingRuntimes installed", len(rts))
	return nil
}

// startReady starts a controller unless it runs, and waits until its readyz answers.
func (p *Platform) startReady(ctx context.Context, proc Process, readyz string) error {
	if pid, running := proc.Running(); running {
		p.logf("%s: already running (pid %d)", proc.Name, pid)
	} else {
		if err := proc.Start(); err != nil {
			return err
		}
		p.logf("%s: started (log %s)", proc.Name, proc.LogFile())
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, p.ComponentTimeout, true, func(ctx context.Context) (bool, error) {
		if _, running := proc.Running(); !running {
			return false, fmt.Errorf("%s exited", proc.Name)
		}
		return httpOK(ctx, readyz), nil
	})
	if err != nil {
		return fmt.Errorf("%s did not become ready: %w\n--- %s (last 30 lines)\n%s", proc.Name, err, proc.LogFile(), Tail(proc.LogFile(), 30))
	}
	return nil
}

func kinds(objs []*unstructured.Unstructured, want ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		for _, k := range want {
			if o.GetKind() == k {
				out = append(out, o)
			}
		}
	}
	return out
}
