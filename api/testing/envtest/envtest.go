// Package envtest starts the envtest control plane (a real kube-apiserver and etcd from
// bin/) that Kiln's integration suites share: Kiln's CRDs, the pinned JobSet CRDs, and on
// request the pinned Kueue CRDs and Kiln's generated webhook configurations.
package envtest

import (
	"fmt"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/api/testing/pinned"
)

// Options say what the control plane serves beyond Kiln's and JobSet's CRDs.
type Options struct {
	// Kueue installs Kueue's CRDs.
	Kueue bool
	// Webhooks registers Kiln's TrainJob webhooks (operator/config/webhook) at the webhook
	// server envtest prepares for the test process (Environment.WebhookInstallOptions).
	Webhooks bool
	// WebhookObjectSelector, when set, limits those webhooks to the objects it selects.
	WebhookObjectSelector *metav1.LabelSelector
}

// New returns an environment to Start. The binaries come from KUBEBUILDER_ASSETS, else
// the repository's bin/.
func New(opts Options) (*envtest.Environment, error) {
	root, err := pinned.RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make test-integration`, which builds it", bin, assets)
		}
	}
	jobset, err := pinned.ModuleDir("platform", "sigs.k8s.io/jobset")
	if err != nil {
		return nil, fmt.Errorf("locating the pinned JobSet module: %w", err)
	}
	crds := []string{
		filepath.Join(root, "api", "config", "crd"),
		filepath.Join(jobset, "config", "components", "crd", "bases"),
	}
	if opts.Kueue {
		kueue, err := pinned.ModuleDir("platform", "sigs.k8s.io/kueue")
		if err != nil {
			return nil, fmt.Errorf("locating the pinned Kueue module: %w", err)
		}
		crds = append(crds, filepath.Join(kueue, "config", "components", "crd", "bases"))
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
	}
	if opts.Webhooks {
		if env.WebhookInstallOptions, err = kilnWebhooks(filepath.Join(root, "operator", "config", "webhook", "manifests.yaml"), opts.WebhookObjectSelector); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// kilnWebhooks reads the generated webhook configurations; envtest points their service
// references at the test process's webhook server.
func kilnWebhooks(path string, selector *metav1.LabelSelector) (envtest.WebhookInstallOptions, error) {
	var out envtest.WebhookInstallOptions
	objs, err := kilntesting.ReadManifests(path)
	if err != nil {
		return out, fmt.Errorf("reading Kiln's webhook configurations: %w", err)
	}
	for _, u := range objs {
		switch u.GetKind() {
		case "MutatingWebhookConfiguration":
			cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, cfg, true); err != nil {
				return out, fmt.Errorf("reading %s: %w", path, err)
			}
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ObjectSelector = selector
			}
			out.MutatingWebhooks = append(out.MutatingWebhooks, cfg)
		case "ValidatingWebhookConfiguration":
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, cfg, true); err != nil {
				return out, fmt.Errorf("reading %s: %w", path, err)
			}
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ObjectSelector = selector
			}
			out.ValidatingWebhooks = append(out.ValidatingWebhooks, cfg)
		}
	}
	if len(out.MutatingWebhooks) == 0 || len(out.ValidatingWebhooks) == 0 {
		return out, fmt.Errorf("%s lacks a mutating or validating webhook configuration: run `make generate`", path)
	}
	return out, nil
}
