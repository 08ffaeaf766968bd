// Package integration runs the harness against envtest: a real kube-apiserver and etcd,
// the pinned binaries from bin/ (KUBEBUILDER_ASSETS), no controllers.
package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	kilnenvtest "github.com/kiln-ml/kiln/api/testing/envtest"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

var (
	testEnv *ctrlenvtest.Environment
	cfg     *rest.Config
	k8s     client.Client
	binDir  string
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "e2e module integration")
}

var _ = BeforeSuite(func() {
	EnforceDefaultTimeoutsWhenUsingContexts()
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	binDir = os.Getenv("KUBEBUILDER_ASSETS")
	Expect(binDir).NotTo(BeEmpty(), "KUBEBUILDER_ASSETS must name bin/ (make test-integration sets it)")
	Expect(filepath.Join(binDir, "kube-apiserver")).To(BeAnExistingFile())
	var err error
	testEnv, err = kilnenvtest.New(kilnenvtest.Options{})
	Expect(err).NotTo(HaveOccurred())
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	Expect(trainer.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
