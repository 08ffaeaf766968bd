// Package upstream runs upstream Kubeflow Trainer's controller manager as a local process,
// with its own CRDs, webhooks and runtimes: the benchmarks' baseline beside Kiln's operator.
package upstream

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
	"github.com/kiln-ml/kiln/e2e/internal/platform/manifests"
	"github.com/kiln-ml/kiln/e2e/internal/platform/pki"
	"github.com/kiln-ml/kiln/e2e/internal/platform/process"
)

// manifestsFile is rendered from the pinned Kubeflow Trainer module by the Makefile:
// its CRDs, webhook configurations and ClusterTrainingRuntimes.
const manifestsFile = "trainer.yaml"

// Trainer is upstream Kubeflow Trainer v2.3.0's controller manager, built from
// tools/trainer, on the local platform.
type Trainer struct {
	// Binary is the controller manager's binary.
	Binary string
	// Dir holds its configuration and the link to its serving certificate.
	Dir string
	// ManifestsDir holds manifestsFile.
	ManifestsDir string
	// Kubeconfig is the admin kubeconfig of the cluster.
	Kubeconfig string
	// RunDir and LogsDir hold its PID file and its log.
	RunDir, LogsDir string
	PKI             pki.PKI

	// Its listeners on 127.0.0.1, the same Kiln's operator has.
	HealthPort, MetricsPort, WebhookPort int
	// Its client budget and TrainJob parallelism, the same Kiln's operator gets.
	QPS         float64
	Burst       int
	Concurrency int
	// Timeout bounds the wait until it is ready.
	Timeout time.Duration

	Out io.Writer
}

// Process is the controller manager as a local process.
func (t Trainer) Process() process.Process {
	return process.Process{
		Name: "trainer-controller-manager",
		Path: t.Binary,
		Args: []string{"--config=" + filepath.Join(t.Dir, "config.yaml"), "--kubeconfig=" + t.Kubeconfig, "--zap-log-level=2"},
		// controller-runtime's webhook server reads its certificate from
		// $TMPDIR/k8s-webhook-server/serving-certs when certificate management is off.
		Env:     []string{"TMPDIR=" + filepath.Join(t.Dir, "tmp")},
		RunDir:  t.RunDir,
		LogsDir: t.LogsDir,
	}
}

// WriteConfig writes the controller manager's configuration (see config).
func (t Trainer) WriteConfig() error {
	return os.WriteFile(filepath.Join(t.Dir, "config.yaml"), []byte(t.config()), 0o644)
}

// config is upstream's Configuration with the same client budget and
// concurrency as Kiln's operator gets, every listener on 127.0.0.1, and no leader
// election or certificate management (the harness issues the serving certificate).
func (t Trainer) config() string {
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
`, t.HealthPort, t.MetricsPort, t.WebhookPort, t.Concurrency, t.QPS, t.Burst)
}

// Readyz is the controller manager's readiness endpoint.
func (t Trainer) Readyz() string { return fmt.Sprintf("http://127.0.0.1:%d/readyz", t.HealthPort) }

func (t Trainer) objects() ([]*unstructured.Unstructured, error) {
	path := filepath.Join(t.ManifestsDir, manifestsFile)
	objs, err := kilntesting.ReadManifests(path)
	if err != nil {
		return nil, fmt.Errorf("upstream Kubeflow Trainer manifests (make %s): %w", path, err)
	}
	return objs, nil
}

// ApplyCRDs installs upstream Kubeflow Trainer's own CRDs.
func (t Trainer) ApplyCRDs(ctx context.Context, cs *cluster.Clients) error {
	objs, err := t.objects()
	if err != nil {
		return err
	}
	crds := kinds(objs, "CustomResourceDefinition")
	if err := cs.Apply(ctx, crds...); err != nil {
		return fmt.Errorf("installing upstream Kubeflow Trainer's CRDs: %w", err)
	}
	return cs.WaitCRDsEstablished(ctx, crds)
}

// Up starts upstream's controller manager, registers its webhooks at its local
// address and installs its ClusterTrainingRuntimes.
func (t Trainer) Up(ctx context.Context, cs *cluster.Clients) error {
	proc := t.Process()
	certs := filepath.Join(t.Dir, "tmp", "k8s-webhook-server")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		return err
	}
	link := filepath.Join(certs, "serving-certs")
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(t.PKI.ServingDir(), link); err != nil {
			return fmt.Errorf("linking the serving certificate for upstream Kubeflow Trainer: %w", err)
		}
	}
	if err := t.WriteConfig(); err != nil {
		return err
	}
	if err := proc.StartReady(ctx, t.Readyz(), t.Timeout, t.Out); err != nil {
		return err
	}
	objs, err := t.objects()
	if err != nil {
		return err
	}
	caBundle, err := t.PKI.CABundle()
	if err != nil {
		return err
	}
	hooks, err := manifests.Addon{WebhookPort: t.WebhookPort}.Localize(kinds(objs, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"), caBundle)
	if err != nil {
		return err
	}
	for _, h := range hooks {
		h.SetName("upstream-trainer-" + h.GetName())
	}
	if err := cs.Apply(ctx, hooks...); err != nil {
		return fmt.Errorf("registering upstream Kubeflow Trainer's webhooks: %w", err)
	}
	rts := kinds(objs, "ClusterTrainingRuntime")
	if err := cs.Apply(ctx, rts...); err != nil {
		return fmt.Errorf("installing upstream Kubeflow Trainer's runtimes: %w", err)
	}
	fmt.Fprintf(t.Out, "upstream Kubeflow Trainer: CRDs, controller manager and %d ClusterTrainingRuntimes installed\n", len(rts))
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
