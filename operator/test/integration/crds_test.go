package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/crds"
)

// kiln-operator --apply-crds, the chart's pre-upgrade hook, against the real apiserver: it
// records the release that applied the CRDs, and a downgrade does not replace them.
var _ = Describe("Applying the CRDs (the chart's pre-upgrade hook)", Serial, func() {
	It("records the release, refuses an older release's CRDs over a newer one's unless allowed, and leaves development builds alone", func(ctx context.Context) {
		scheme := runtime.NewScheme()
		Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		annotation := func(ctx context.Context) string {
			got := &apiextensionsv1.CustomResourceDefinition{}
			Expect(c.Get(ctx, client.ObjectKey{Name: "trainjobs.trainer.kubeflow.org"}, got)).To(Succeed())
			return got.Annotations[kiln.AnnotationCRDsVersion]
		}
		DeferCleanup(func(ctx context.Context) {
			// As a development build applies them: without the annotation (server-side apply
			// removes the field this manager no longer sets).
			Expect(crds.Apply(ctx, c, time.Minute, crds.Options{AllowDowngrade: true})).To(Succeed())
			Expect(annotation(ctx)).To(BeEmpty())
		})

		Expect(crds.Apply(ctx, c, time.Minute, crds.Options{Version: "v0.3.0"})).To(Succeed())
		Expect(annotation(ctx)).To(Equal("v0.3.0"))
		Expect(crds.Apply(ctx, c, time.Minute, crds.Options{Version: "v0.3.1"})).To(Succeed(), "an upgrade")
		Expect(annotation(ctx)).To(Equal("v0.3.1"))

		err = crds.Apply(ctx, c, time.Minute, crds.Options{Version: "v0.2.0"})
		Expect(err).To(MatchError(MatchRegexp(`^CRD \S+ was applied by Kiln v0\.3\.1, newer than this operator's v0\.2\.0: `)))
		Expect(err).To(MatchError(ContainSubstring("--set crds.upgrade=false")))
		Expect(annotation(ctx)).To(Equal("v0.3.1"), "nothing changed")

		Expect(crds.Apply(ctx, c, time.Minute, crds.Options{Version: "0a1b2c3"})).To(Succeed(), "a development build is not compared")
		Expect(crds.Apply(ctx, c, time.Minute, crds.Options{Version: "v0.2.0", AllowDowngrade: true})).To(Succeed())
		Expect(annotation(ctx)).To(Equal("v0.2.0"))
	})
})
