package integration

import (
	"context"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/e2e/internal/platform/manifests"
	"github.com/kiln-ml/kiln/e2e/internal/platform/pki"
)

var _ = Describe("envtest", func() {
	It("runs the pinned kube-apiserver", func() {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		v, err := dc.ServerVersion()
		Expect(err).NotTo(HaveOccurred())
		Expect(v.GitVersion).To(Equal("v1.36.3"))
	})
})

var _ = Describe("Localized JobSet and Kueue releases", func() {
	for _, tc := range []struct {
		name  string
		addon manifests.Addon
		crds  []string
	}{
		{"jobset", manifests.Addon{WebhookPort: 19443}, []string{"jobsets.jobset.x-k8s.io"}},
		{"kueue", manifests.Addon{WebhookPort: 19444, KeepConversion: []string{"workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io", "multikueueclusters.kueue.x-k8s.io"}, WebhookGroups: []string{"kueue.x-k8s.io", "batch", "jobset.x-k8s.io", "trainer.kubeflow.org"}},
			[]string{"workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io"}},
	} {
		It("installs "+tc.name+"'s CRDs and webhooks as the real apiserver accepts them", func(ctx context.Context) {
			objs, err := kilntesting.ReadManifests(filepath.Join(binDir, "manifests", tc.name+".yaml"))
			Expect(err).NotTo(HaveOccurred())
			certs := pki.PKI{Dir: GinkgoT().TempDir()}
			Expect(certs.Ensure(time.Now())).To(Succeed())
			ca, err := certs.CABundle()
			Expect(err).NotTo(HaveOccurred())
			local, err := tc.addon.Localize(objs, ca)
			Expect(err).NotTo(HaveOccurred())
			Expect(local).NotTo(BeEmpty())
			for _, obj := range local {
				By("applying " + obj.GetKind() + " " + obj.GetName())
				opts := []client.ApplyOption{client.FieldOwner("kiln-test"), client.ForceOwnership}
				isWebhook := obj.GetKind() == "MutatingWebhookConfiguration" || obj.GetKind() == "ValidatingWebhookConfiguration"
				if isWebhook {
					// Validated by the apiserver but not stored: no controller serves them here,
					// and failurePolicy Fail would block the other specs' writes.
					opts = append(opts, client.DryRunAll)
				}
				Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), opts...)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
				if isWebhook {
					hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
					for _, h := range hooks {
						url, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "url")
						Expect(url).To(HavePrefix("https://127.0.0.1:"))
					}
				}
			}
			for _, name := range tc.crds {
				Eventually(ctx, func(g Gomega) {
					crd := &apiextensionsv1.CustomResourceDefinition{}
					g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
					g.Expect(crd.Status.Conditions).To(ContainElement(And(
						HaveField("Type", apiextensionsv1.Established), HaveField("Status", apiextensionsv1.ConditionTrue))))
				}).Should(Succeed())
			}
		})
	}
})
