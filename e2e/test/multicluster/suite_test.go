// Package multicluster is Kiln's end-to-end suite across clusters: a MultiKueue manager and
// its worker clusters, the local platform started with KILN_WORKERS (make
// test-e2e-multicluster starts one). It reaches every cluster through the platform's
// configuration, from KILN_ROOT.
package multicluster

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

var (
	manager client.Client
	// workers are the worker clusters' clients, by MultiKueueCluster name.
	workers = map[string]client.Client{}
	plat    platform.Config
)

func TestMultiCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	ctrllog.SetLogger(GinkgoLogr)
	RunSpecs(t, "Kiln multi-cluster e2e")
}

var _ = BeforeSuite(func() {
	root, err := platform.RepoRoot(os.Getenv("KILN_ROOT"))
	Expect(err).NotTo(HaveOccurred())
	plat, err = platform.DefaultConfig(root).FromEnv()
	Expect(err).NotTo(HaveOccurred())
	Expect(plat.Workers).To(BeNumerically(">=", 2), "%s must name at least 2 worker clusters (make test-e2e-multicluster sets it)", platform.EnvWorkers)
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(trainer.AddToScheme(scheme)).To(Succeed())
	Expect(kueue.AddToScheme(scheme)).To(Succeed())
	Expect(kiln.AddToScheme(scheme)).To(Succeed())
	connect := func(c platform.Config) client.Client {
		cfg, err := c.RESTConfig()
		Expect(err).NotTo(HaveOccurred())
		cfg.QPS, cfg.Burst = 100, 200
		cl, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		return cl
	}
	manager = connect(plat)
	for i := 1; i <= plat.Workers; i++ {
		workers[plat.WorkerName(i)] = connect(plat.Worker(i))
	}
	EnforceDefaultTimeoutsWhenUsingContexts()
	SetDefaultEventuallyTimeout(3 * time.Minute)
	SetDefaultEventuallyPollingInterval(time.Second)
})
