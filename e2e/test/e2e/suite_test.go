// Package e2e is Kiln's black-box end-to-end suite. It runs against whatever cluster
// KUBECONFIG points at: the local platform (`make test-e2e` starts one) or a real cluster.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/test/framework"
)

// chartMode labels the specs that also run against the chart's install (make
// test-e2e-chart): what the chart changes (its own specs, the API server and the webhooks
// behind Services, RBAC as pods, metrics through the Service) and one smoke path through
// each surface. Every other spec proves operator logic that does not depend on how Kiln is
// installed, and runs once, against Kiln as processes. e2e/README.md has the table.
const chartMode = "chart"

var (
	cfg       *rest.Config
	k8s       client.Client
	clientset *kubernetes.Clientset
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	if !conformanceRun() {
		RunSpecs(t, "Kiln e2e")
		return
	}
	// The conformance suite: the same binary, its specs only unless told otherwise.
	suite, reporter := GinkgoConfiguration()
	if suite.LabelFilter == "" {
		suite.LabelFilter = conformance
	}
	RunSpecs(t, "Kiln conformance", suite, reporter)
}

var _ = BeforeSuite(func() {
	kubeconfig := os.Getenv("KUBECONFIG")
	Expect(kubeconfig).NotTo(BeEmpty(), "KUBECONFIG must point at the cluster under test (make test-e2e sets it)")
	var err error
	cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 100, 200
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(trainer.AddToScheme(scheme)).To(Succeed())
	Expect(kiln.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	// Specs pass their context to Eventually; keep the default timeouts anyway.
	EnforceDefaultTimeoutsWhenUsingContexts()
	SetDefaultEventuallyTimeout(90 * time.Second)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
})

// Where the suite's time went, longest spec first: the e2e budget is spent by mode
// (e2e/README.md), and this is the table to read when it tightens.
// With KILN_E2E_TIMES set (make test-e2e sets it) the table goes to that file: in parallel
// runs ginkgo keeps a passing suite's output to itself.
var _ = ReportAfterSuite("spec times", func(r Report) {
	if conformanceRun() {
		framework.PrintConformanceReport(os.Stdout, r)
		return
	}
	Expect(framework.ReportSpecTimes(r)).To(Succeed())
})

// When a spec fails on the chart's install, the Kiln, JobSet and Kueue pods that restarted
// (and why their last container ended) go into its output: a failure a crashed component
// explains says so.
var _ = JustAfterEach(func(ctx context.Context) {
	if !CurrentSpecReport().Failed() || os.Getenv(platform.EnvInstall) != string(platform.InstallChart) || k8s == nil {
		return
	}
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(platform.APIServerNamespace)); err != nil {
		GinkgoWriter.Printf("listing the pods of %s: %v\n", platform.APIServerNamespace, err)
		return
	}
	for _, pod := range pods.Items {
		for _, cs := range pod.Status.ContainerStatuses {
			line := fmt.Sprintf("pod %s container %s: ready=%t restarts=%d", pod.Name, cs.Name, cs.Ready, cs.RestartCount)
			if t := cs.LastTerminationState.Terminated; t != nil {
				line += fmt.Sprintf(", last ended %s: %s (exit %d) %s", t.FinishedAt.UTC().Format(time.RFC3339), t.Reason, t.ExitCode, t.Message)
			}
			GinkgoWriter.Println(line)
		}
	}
})

// letCLIUserIn lets the CLI's user (the local platform's demo user) train in namespace ns.
func letCLIUserIn(ctx context.Context, ns string) {
	GinkgoHelper()
	Expect(k8s.Create(ctx, platform.Binding("RoleBinding", ns, platform.DemoUser, "kiln-user", platform.DemoNamespace, platform.DemoUser))).To(Succeed())
}

// newNamespace creates a namespace for one spec and deletes it afterwards.
func newNamespace(ctx context.Context, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, ns))).To(Succeed())
	})
	return ns.Name
}
