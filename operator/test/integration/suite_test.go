// Package integration tests the TrainJob controller against a real kube-apiserver and etcd
// (envtest, binaries from bin/). No JobSet controller runs: the tests write JobSet status
// themselves, as the JobSet controller would.
package integration

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kiln-ml/kiln/api/kueue"
	kilnenvtest "github.com/kiln-ml/kiln/api/testing/envtest"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	kilncontroller "github.com/kiln-ml/kiln/operator/internal/controller"
	kilnwebhook "github.com/kiln-ml/kiln/operator/internal/webhook"
)

var (
	testEnv *ctrlenvtest.Environment
	cfg     *rest.Config
	k8s     client.Client
	cancel  context.CancelFunc
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Operator integration")
}

var _ = BeforeSuite(func() {
	EnforceDefaultTimeoutsWhenUsingContexts()
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	var err error
	// Kiln's generated webhooks, except for what a spec creates as if they had been down.
	testEnv, err = kilnenvtest.New(kilnenvtest.Options{Webhooks: true, WebhookObjectSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: labelSkipAdmission, Operator: metav1.LabelSelectorOpDoesNotExist}},
	}})
	Expect(err).NotTo(HaveOccurred())
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(trainer.AddToScheme(scheme)).To(Succeed())
	Expect(jobsetv1alpha2.AddToScheme(scheme)).To(Succeed())
	Expect(kueue.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	wh := testEnv.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:        scheme,
		Cache:         kilncontroller.CacheOptions(),
		Client:        kilncontroller.ClientOptions(),
		Metrics:       metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir}),
	})
	Expect(err).NotTo(HaveOccurred())
	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	rec := kilncontroller.NewTrainJobReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("kiln-trainjob-controller"), clock.RealClock{})
	Expect(rec.SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: ptrTrue()})).To(Succeed())
	Expect(kilnwebhook.Setup(mgr, clock.RealClock{}, []string{preservingUser})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(func() error {
		conn, err := tls.Dial("tcp", net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort)), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe
		if err == nil {
			conn.Close()
		}
		return err
	}).Should(Succeed())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

func ptrTrue() *bool { b := true; return &b }

// preservingUser stands for Kueue: a client that writes TrainJobs without Kiln's fields.
const preservingUser = "system:serviceaccount:kueue-system:kueue-controller-manager"

// labelSkipAdmission lets a spec create a TrainJob the webhooks would reject, as if it
// had been created while they were down.
const labelSkipAdmission = "test.kiln.dev/skip-admission"

// updateTrainJob applies mutate to the latest TrainJob and updates it, retrying when the
// controller wrote its status in between.
func updateTrainJob(ctx context.Context, tj *trainer.TrainJob, mutate func(*trainer.TrainJob)) error {
	var err error
	for range 20 {
		if err = k8s.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
			return err
		}
		mutate(tj)
		if err = k8s.Update(ctx, tj); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}
