package platform

import (
	"context"
	"fmt"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/e2e/internal/platform/cluster"
	"github.com/kiln-ml/kiln/e2e/internal/platform/manifests"
	"github.com/kiln-ml/kiln/e2e/internal/platform/realnode"
	"github.com/kiln-ml/kiln/runtimes"
)

// OperatorProcess is Kiln's operator, run from bin/ like the other controllers.
func (p *Platform) OperatorProcess() Process {
	return Process{
		Name: "kiln-operator",
		Path: p.Bin("kiln-operator"),
		Args: []string{
			"--kubeconfig=" + p.Kubeconfig(),
			"--leader-elect=false",
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", p.OperatorHealth),
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", p.OperatorMetrics),
			fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", p.OperatorPprof),
			"--webhook-host=127.0.0.1",
			fmt.Sprintf("--webhook-port=%d", p.OperatorWebhook),
			"--webhook-cert-dir=" + p.PKI().ServingDir(),
			"--cert-management=files",
			// Trainer pods on the real node reach the status server at the node's address
			// (forwarded to 127.0.0.1), which the platform's serving certificate names.
			fmt.Sprintf("--status-server-bind-address=127.0.0.1:%d", p.OperatorStatus),
			fmt.Sprintf("--status-server-url=https://%s:%d", realnode.NodeIP, p.OperatorStatus),
			"--status-server-ca-file=" + p.PKI().CAFile(),
			fmt.Sprintf("--kube-api-qps=%g", p.Controller.QPS),
			fmt.Sprintf("--kube-api-burst=%d", p.Controller.Burst),
			fmt.Sprintf("--trainjob-concurrency=%d", p.Controller.Concurrency),
			"--zap-log-level=2",
		},
		Env:     p.OTLPEnv(),
		RunDir:  p.RunDir(),
		LogsDir: p.LogsDir(),
	}
}

// applyKilnCRDs installs the trainer.kubeflow.org CRDs generated into api/config/crd.
func (p *Platform) applyKilnCRDs(ctx context.Context, cs *cluster.Clients) error {
	files, err := filepath.Glob(filepath.Join(p.Root, "api", "config", "crd", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs under api/config/crd (run `make generate`): %w", err)
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		objs, err := kilntesting.ReadManifests(f)
		if err != nil {
			return err
		}
		crds = append(crds, objs...)
	}
	if err := cs.Apply(ctx, crds...); err != nil {
		return fmt.Errorf("installing Kiln's CRDs: %w", err)
	}
	return cs.WaitCRDsEstablished(ctx, crds)
}

// StartOperator starts the operator unless it runs, and waits until it is ready.
func (p *Platform) StartOperator(ctx context.Context) error {
	return p.OperatorProcess().StartReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", p.OperatorHealth), p.ComponentTimeout, p.Out)
}

// kilnUp starts the operator and installs the runtime catalog, or installs the chart.
func (p *Platform) kilnUp(ctx context.Context, cs *cluster.Clients) error {
	if p.Install == InstallChart {
		return p.chartUp(ctx, cs)
	}
	if err := p.StartOperator(ctx); err != nil {
		return err
	}
	hooks, err := p.operatorWebhooks()
	if err != nil {
		return err
	}
	if err := cs.Apply(ctx, hooks...); err != nil {
		return fmt.Errorf("registering Kiln's webhooks: %w", err)
	}
	// Earlier builds named the mutating configuration so that it came before Kueue's; on a
	// platform they installed it would call the defaulter a second time.
	mwc := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	if err := cs.Dyn.Resource(mwc).Delete(ctx, legacyMutatingConfiguration, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the webhook configuration of earlier builds, %s: %w", legacyMutatingConfiguration, err)
	}
	rts, err := runtimes.ClusterTrainingRuntimes()
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, rt := range rts {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		objs = append(objs, u)
	}
	if err := cs.Apply(ctx, objs...); err != nil {
		return fmt.Errorf("installing the runtime catalog: %w", err)
	}
	p.logf("kiln: CRDs, operator and %d ClusterTrainingRuntimes installed", len(objs))
	if p.WithoutKilnAPIServer {
		return nil
	}
	return p.apiServerUp(ctx, cs)
}

// legacyMutatingConfiguration is the name earlier builds gave the defaulter's configuration.
const legacyMutatingConfiguration = "kiln-trainjob-defaulter"

// operatorWebhooks are the operator's webhook configurations, generated from its markers
// (operator/config/webhook, the same the chart installs), pointed at its local address.
func (p *Platform) operatorWebhooks() ([]*unstructured.Unstructured, error) {
	caBundle, err := p.PKI().CABundle()
	if err != nil {
		return nil, err
	}
	objs, err := kilntesting.ReadManifests(filepath.Join(p.Root, "operator", "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading Kiln's webhook configurations: %w", err)
	}
	return manifests.Addon{WebhookPort: p.OperatorWebhook}.Localize(objs, caBundle)
}
