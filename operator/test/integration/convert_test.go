package integration

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/runtimes"
)

// What the converter (apiserver/internal/migrate) writes for each of its realistic sources
// is what a user applies: the apiserver, with Kiln's CRDs and webhooks, must take it on the
// catalog's runtimes as it is.
var _ = Describe("Converted manifests", func() {
	It("are accepted by the apiserver with Kiln's CRDs and webhooks, on the catalog's runtimes", func(ctx context.Context) {
		catalog, err := runtimes.ClusterTrainingRuntimes()
		Expect(err).NotTo(HaveOccurred())
		for _, rt := range catalog {
			Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, rt.DeepCopy()))).To(Succeed())
		}
		goldens, err := filepath.Glob(filepath.Join("..", "..", "..", "apiserver", "internal", "migrate", "testdata", "*.golden"))
		Expect(err).NotTo(HaveOccurred())
		Expect(goldens).NotTo(BeEmpty())
		for _, g := range goldens {
			data, err := os.ReadFile(g)
			Expect(err).NotTo(HaveOccurred())
			objs, err := kilntesting.DecodeManifests(data)
			Expect(err).NotTo(HaveOccurred(), g)
			Expect(objs).NotTo(BeEmpty(), g)
			ns := newNamespace(ctx)
			for _, o := range objs {
				o.SetNamespace(ns)
				err := k8s.Create(ctx, o, client.DryRunAll)
				Expect(err).NotTo(HaveOccurred(), "%s: %s %s refused: %v", filepath.Base(g), o.GetKind(), o.GetName(), apierrors.ReasonForError(err))
			}
		}
	})
})
