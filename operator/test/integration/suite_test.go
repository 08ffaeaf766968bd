// Package integration tests the TrainJob controller against a real kube-apiserver and etcd
// (envtest, binaries from bin/). No JobSet controller runs: the tests write JobSet status
// themselves, as the JobSet controller would.
package integration

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	"github.com/kiln-ml/kiln/api/kueue"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	kilnenvtest "github.com/kiln-ml/kiln/api/testing/envtest"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	kilncontroller "github.com/kiln-ml/kiln/operator/internal/controller"
	"github.com/kiln-ml/kiln/operator/internal/controller/crontrainjob"
	"github.com/kiln-ml/kiln/operator/internal/controller/trainjob"
	kilnwebhook "github.com/kiln-ml/kiln/operator/internal/webhook"
)

var (
	testEnv *ctrlenvtest.Environment
	cfg     *rest.Config
	k8s     client.Client
	cancel  context.CancelFunc
)

// snapshotSweep is how often the operator deletes the shared runtime snapshots no job names.
const snapshotSweep = time.Second

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
	Expect(kiln.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	wh := testEnv.WebhookInstallOptions
	// The operator runs as its own ServiceAccount with exactly the generated RBAC
	// (config/rbac): a permission the code needs and the markers lack fails these specs.
	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	opCfg = operatorConfig(ctx)
	mgr, err := ctrl.NewManager(opCfg, ctrl.Options{
		Scheme:        scheme,
		Cache:         kilncontroller.CacheOptions(),
		Client:        kilncontroller.ClientOptions(),
		Metrics:       metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir}),
	})
	Expect(err).NotTo(HaveOccurred())
	rec := trainjob.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("kiln-trainjob-controller"), clock.RealClock{}).
		WithSnapshotSweep(snapshotSweep)
	Expect(rec.SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: ptr.To(true)})).To(Succeed())
	// CronTrainJobs run on a clock the specs move.
	cronClock = clocktesting.NewFakeClock(time.Now())
	cron := crontrainjob.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("kiln-crontrainjob-controller"), cronClock)
	Expect(cron.SetupWithManager(mgr, controller.Options{SkipNameValidation: ptr.To(true)})).To(Succeed())
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
	// Specs start once the controllers see the cluster: a cold cache would otherwise make
	// the first spec's job wait for its runtime while its deadline runs (a 2 s deadline
	// once passed before the JobSet could be created).
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue(), "the operator's caches synced")
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// opCfg is the operator's client configuration (its ServiceAccount, its generated RBAC).
var opCfg *rest.Config

// cronClock is the CronTrainJob controller's clock.
var cronClock *clocktesting.FakeClock

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

// operatorConfig is a client configuration of ServiceAccount kiln-system/kiln-operator,
// bound to the ClusterRole and Role generated from the operator's RBAC markers.
func operatorConfig(ctx context.Context) *rest.Config {
	GinkgoHelper()
	roles, err := kilntesting.ReadManifests(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kiln-system"}}))).To(Succeed())
	for _, u := range roles {
		Expect(k8s.Create(ctx, u)).To(Succeed())
		binding := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": u.GetKind() + "Binding",
			"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace()},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": u.GetKind(), "name": u.GetName()},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "namespace": "kiln-system", "name": "kiln-operator"}},
		}}
		Expect(k8s.Create(ctx, binding)).To(Succeed())
	}
	Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kiln-system", Name: "kiln-operator"}})).To(Succeed())
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts("kiln-system").CreateToken(ctx, "kiln-operator", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	sa := rest.AnonymousClientConfig(cfg)
	sa.BearerToken = tr.Status.Token
	return sa
}
