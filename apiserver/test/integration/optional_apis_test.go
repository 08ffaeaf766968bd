package integration

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kilnenvtest "github.com/kiln-ml/kiln/api/testing/envtest"
	"github.com/kiln-ml/kiln/api/testing/pinned"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
)

// A cluster of its own, where Kueue is installed after the API server started: the Helm
// chart installs both at once, and Kueue's CRDs may be served after the server's pod
// starts; a user may also install Kueue after Kiln.
var _ = Describe("An API server started before Kueue", Ordered, func() {
	var (
		env      *envtest.Environment
		auto     *kube.Clients
		required *kube.Clients
		started  chan error
	)
	BeforeAll(func(ctx context.Context) {
		var err error
		env, err = kilnenvtest.New(kilnenvtest.Options{})
		Expect(err).NotTo(HaveOccurred())
		cfg, err := env.Start()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(env.Stop)
		// The clients run until the spec's cluster stops.
		runCtx, stop := context.WithCancel(context.Background())
		DeferCleanup(stop)
		log := slog.New(slog.NewTextHandler(GinkgoWriter, nil))

		auto, err = kube.NewClients(cfg, kube.Options{DiscoveryInterval: 200 * time.Millisecond, Log: log})
		Expect(err).NotTo(HaveOccurred())
		Expect(auto.Start(runCtx)).To(Succeed(), "starts without Kueue")
		Expect(auto.Kueue()).To(BeFalse())
		Expect(auto.Crons()).To(BeTrue(), "Kiln's CRDs are installed")

		required, err = kube.NewClients(cfg, kube.Options{DiscoveryInterval: 200 * time.Millisecond, RequireKueue: true, Log: log})
		Expect(err).NotTo(HaveOccurred())
		started = make(chan error, 1)
		go func() { started <- required.Start(runCtx) }()
	})

	It("with Kueue required, is not started while Kueue is missing", func() {
		Consistently(started).WithTimeout(2 * time.Second).ShouldNot(Receive())
		Expect(required.Kueue()).To(BeFalse())
	})

	It("serves Kueue's queues once Kueue is installed, without a restart", func(ctx context.Context) {
		kueue, err := pinned.ModuleDir("platform", "sigs.k8s.io/kueue")
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join(kueue, "config", "components", "crd", "bases")}, ErrorIfPathMissing: true,
		})
		Expect(err).NotTo(HaveOccurred())

		Eventually(started).Should(Receive(BeNil()), "the required server starts once Kueue is served")
		Expect(required.Kueue()).To(BeTrue())
		Eventually(auto.Kueue).Should(BeTrue(), "the other looks again and finds it")

		By("caching Kueue's objects from then on")
		c, err := client.New(env.Config, client.Options{})
		Expect(err).NotTo(HaveOccurred())
		lq := kube.New(kube.LocalQueueGVK)
		lq.SetNamespace(metav1.NamespaceDefault)
		lq.SetName("later")
		Expect(unstructured.SetNestedField(lq.Object, "cluster-queue", "spec", "clusterQueue")).To(Succeed())
		Expect(c.Create(ctx, lq)).To(Succeed())
		for _, k := range []*kube.Clients{auto, required} {
			Eventually(func(g Gomega) {
				list := kube.NewList(kube.LocalQueueGVK)
				g.Expect(k.Cache.List(ctx, list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
				g.Expect(list.Items).To(HaveLen(1))
			}).Should(Succeed())
		}
	})
})
