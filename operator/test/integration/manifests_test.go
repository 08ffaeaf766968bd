package integration

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/operator/internal/manifests"
)

// The chart's default-queue hooks (`kiln-operator --apply-manifests`) against a real
// apiserver: objects whose kind is installed only later (as Kueue's CRDs are, in the same
// Helm release) are applied once it is served; invalid ones fail at once.
var _ = Describe("Applying manifests for the chart's hooks", func() {
	// A cluster-scoped kind of a group of its own, so that no other spec knows it.
	crd := func() *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "queues.hooks.kiln.dev"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "hooks.kiln.dev",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "queues", Singular: "queue", Kind: "Queue", ListKind: "QueueList"},
				Scope: apiextensionsv1.ClusterScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"quota": {Type: "integer", Minimum: ptr.To(0.0)},
							}},
						},
					}},
				}},
			},
		}
	}
	write := func(yaml string) string {
		path := filepath.Join(GinkgoT().TempDir(), "queues.yaml")
		Expect(os.WriteFile(path, []byte(yaml), 0o644)).To(Succeed())
		return path
	}

	It("waits until the kind is served, applies, and deletes; refuses an invalid object at once", func(ctx context.Context) {
		objs, err := manifests.Read(write(`
apiVersion: hooks.kiln.dev/v1
kind: Queue
metadata:
  name: default
spec:
  quota: 8
---
`))
		Expect(err).NotTo(HaveOccurred())
		Expect(objs).To(HaveLen(1))

		By("the CRD arrives two seconds after the hook started")
		scheme := runtime.NewScheme()
		Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
		crds, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		go func() {
			defer GinkgoRecover()
			time.Sleep(2 * time.Second)
			Expect(crds.Create(context.Background(), crd())).To(Succeed())
		}()
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(crds.Delete(ctx, crd()))).To(Succeed()) })
		start := time.Now()
		Expect(manifests.Apply(ctx, k8s, objs, 200*time.Millisecond, time.Minute)).To(Succeed())
		Expect(time.Since(start)).To(BeNumerically(">=", 2*time.Second), "it waited for the kind")
		got := &unstructured.Unstructured{}
		got.SetAPIVersion("hooks.kiln.dev/v1")
		got.SetKind("Queue")
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "default"}, got)).To(Succeed())
		Expect(got.GetManagedFields()).To(ContainElement(HaveField("Manager", manifests.FieldManager)))

		By("an invalid object fails with the apiserver's reason, without waiting for the timeout")
		bad, err := manifests.Read(write("apiVersion: hooks.kiln.dev/v1\nkind: Queue\nmetadata: {name: bad}\nspec: {quota: -1}\n"))
		Expect(err).NotTo(HaveOccurred())
		start = time.Now()
		err = manifests.Apply(ctx, k8s, bad, 200*time.Millisecond, time.Minute)
		Expect(err).To(MatchError(ContainSubstring("spec.quota")))
		Expect(time.Since(start)).To(BeNumerically("<", 30*time.Second))

		By("deleting: the object goes, a kind that is not served is no error")
		gone, err := manifests.Read(write("apiVersion: nowhere.kiln.dev/v1\nkind: Missing\nmetadata: {name: x}\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(manifests.Delete(ctx, k8s, append(objs, gone...))).To(Succeed())
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: "default"}, got))).To(BeTrue())
	})

	It("removes the aggregationRule of ClusterRoles, a missing one being no error", func(ctx context.Context) {
		role := &rbacv1.ClusterRole{
			ObjectMeta:      metav1.ObjectMeta{Name: "hooks-aggregated"},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"hooks.kiln.dev/aggregate": "true"}}}},
		}
		Expect(k8s.Create(ctx, role)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, role))).To(Succeed()) })
		Expect(manifests.Disaggregate(ctx, k8s, []string{"hooks-aggregated", "hooks-missing"})).To(Succeed())
		got := &rbacv1.ClusterRole{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "hooks-aggregated"}, got)).To(Succeed())
		Expect(got.AggregationRule).To(BeNil())
	})

	It("refuses a document without a kind or a name, naming it", func() {
		_, err := manifests.Read(write("apiVersion: hooks.kiln.dev/v1\nkind: Queue\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\n"))
		Expect(err).To(MatchError(ContainSubstring("document 2 needs apiVersion, kind and metadata.name")))
	})
})
