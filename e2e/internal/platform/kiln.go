package platform

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

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
			"--webhook-host=127.0.0.1",
			fmt.Sprintf("--webhook-port=%d", p.OperatorWebhook),
			"--webhook-cert-dir=" + p.PKI().ServingDir(),
			"--cert-management=files",
			fmt.Sprintf("--kube-api-qps=%g", p.Controller.QPS),
			fmt.Sprintf("--kube-api-burst=%d", p.Controller.Burst),
			fmt.Sprintf("--trainjob-concurrency=%d", p.Controller.Concurrency),
			"--zap-log-level=2",
		},
		RunDir:  p.RunDir(),
		LogsDir: p.LogsDir(),
	}
}

// applyKilnCRDs installs the trainer.kubeflow.org CRDs generated into api/config/crd.
func (p *Platform) applyKilnCRDs(ctx context.Context, cs *clientSet) error {
	files, err := filepath.Glob(filepath.Join(p.Root, "api", "config", "crd", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs under api/config/crd (run `make generate`): %v", err)
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		objs, err := ReadManifests(f)
		if err != nil {
			return err
		}
		crds = append(crds, objs...)
	}
	if err := cs.apply(ctx, crds...); err != nil {
		return fmt.Errorf("installing Kiln's CRDs: %w", err)
	}
	return cs.waitCRDsEstablished(ctx, crds)
}

// StartOperator starts the operator unless it runs, and waits until it is ready.
func (p *Platform) StartOperator(ctx context.Context) error {
	return p.startReady(ctx, p.OperatorProcess(), fmt.Sprintf("http://127.0.0.1:%d/readyz", p.OperatorHealth))
}

// kilnUp starts the operator and installs the runtime catalog.
func (p *Platform) kilnUp(ctx context.Context, cs *clientSet) error {
	if err := p.StartOperator(ctx); err != nil {
		return err
	}
	caBundle, err := p.PKI().CABundle()
	if err != nil {
		return err
	}
	if err := cs.apply(ctx, p.operatorWebhooks(caBundle)...); err != nil {
		return fmt.Errorf("registering Kiln's webhooks: %w", err)
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
	if err := cs.apply(ctx, objs...); err != nil {
		return fmt.Errorf("installing the runtime catalog: %w", err)
	}
	p.logf("kiln: CRDs, operator and %d ClusterTrainingRuntimes installed", len(objs))
	if p.WithoutKilnAPIServer {
		return nil
	}
	return p.apiServerUp(ctx, cs)
}

// operatorWebhooks registers the operator's TrainJob webhooks at its local address.
func (p *Platform) operatorWebhooks(caBundle []byte) []*unstructured.Unstructured {
	hook := func(name, path string) map[string]any {
		return map[string]any{
			"name":                    name,
			"admissionReviewVersions": []any{"v1"},
			"sideEffects":             "None",
			"failurePolicy":           "Fail",
			"timeoutSeconds":          int64(10),
			"clientConfig": map[string]any{
				"url":      fmt.Sprintf("https://127.0.0.1:%d%s", p.OperatorWebhook, path),
				"caBundle": encodeBase64(caBundle),
			},
			"rules": []any{map[string]any{
				"apiGroups": []any{"trainer.kubeflow.org"}, "apiVersions": []any{"v1alpha1"},
				"operations": []any{"CREATE", "UPDATE"}, "resources": []any{"trainjobs"},
			}},
		}
	}
	return []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
			"metadata": map[string]any{"name": "kiln-trainjob-defaulter"}, // operator/internal/webhook.MutatingConfigurationName
			"webhooks": []any{hook("defaulter.trainjob.kiln.dev", "/mutate-trainer-kubeflow-org-v1alpha1-trainjob")},
		}},
		{Object: map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
			"metadata": map[string]any{"name": "kiln-trainjob-validator"}, // operator/internal/webhook.ValidatingConfigurationName
			"webhooks": []any{hook("validator.trainjob.kiln.dev", "/validate-trainer-kubeflow-org-v1alpha1-trainjob")},
		}},
	}
}
