// Package integration runs Kiln's API server, with its real handlers, authentication and
// impersonation, against a real kube-apiserver with RBAC (envtest, binaries from bin/).
// Callers are ServiceAccounts whose tokens the server reviews with Kubernetes; each
// spec runs through a Connect, a gRPC and a gRPC-Web client.
package integration

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kiln-ml/kiln/api/clientconfig"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	kilnenvtest "github.com/kiln-ml/kiln/api/testing/envtest"
	"github.com/kiln-ml/kiln/apiserver/internal/auth"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/server"
)

var (
	testEnv *envtest.Environment
	admin   client.Client
	adminCS kubernetes.Interface
	// apiURL is the API server under test (TLS, HTTP/2).
	apiURL     string
	httpServer *httptest.Server
	apiServer  *server.Server
	cancel     context.CancelFunc
	// tokens of the callers, by name.
	tokens = map[string]string{}
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "API server integration")
}

var _ = BeforeSuite(func() {
	EnforceDefaultTimeoutsWhenUsingContexts()
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	var err error
	testEnv, err = kilnenvtest.New(kilnenvtest.Options{Kueue: true})
	Expect(err).NotTo(HaveOccurred())
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	scheme, err := kube.Scheme()
	Expect(err).NotTo(HaveOccurred())
	admin, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	adminCS, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())

	ctx, c := context.WithCancel(context.Background())
	cancel = c
	// The server runs as its own ServiceAccount with the RBAC the chart installs, not as
	// the envtest admin: what it may do is what a real install lets it do.
	applyFile(ctx, filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	applyFile(ctx, filepath.Join("..", "..", "config", "rbac", "users.yaml"))
	createNamespace(ctx, "kiln-system")
	serverToken := serviceAccount(ctx, "kiln-system", "kiln-apiserver")
	bindCluster(ctx, "kiln-apiserver", "kiln-apiserver", "kiln-system", "kiln-apiserver")
	serverCfg := rest.AnonymousClientConfig(cfg)
	serverCfg.BearerToken = serverToken
	serverCfg.QPS, serverCfg.Burst = 500, 1000

	// Callers: alice trains in team-a, bob in team-b, dana everywhere (cluster-wide
	// binding), carol has no access at all.
	for _, u := range []struct{ name, ns string }{{"alice", "team-a"}, {"bob", "team-b"}, {"carol", "team-c"}, {"dana", "team-d"}} {
		createNamespace(ctx, u.ns)
		tokens[u.name] = serviceAccount(ctx, u.ns, u.name)
	}
	bindNamespace(ctx, "team-a", "alice", "kiln-user", "team-a", "alice")
	bindNamespace(ctx, "team-b", "bob", "kiln-user", "team-b", "bob")
	for _, u := range []struct{ name, ns string }{{"alice", "team-a"}, {"bob", "team-b"}} {
		bindCluster(ctx, u.name+"-viewer", "kiln-cluster-viewer", u.ns, u.name)
	}
	bindCluster(ctx, "dana-user", "kiln-user", "team-d", "dana")
	bindCluster(ctx, "dana-viewer", "kiln-cluster-viewer", "team-d", "dana")
	applyYAML(ctx, testRuntime)
	applyYAML(ctx, warningPolicy)

	k, err := kube.NewClients(serverCfg, kube.Options{AuthzCacheTTL: time.Second})
	Expect(err).NotTo(HaveOccurred())
	// The informers retry until the server's RBAC binding reaches the authorizer.
	Expect(k.Start(ctx)).To(Succeed())
	Expect(k.Kueue()).To(BeTrue(), "Kueue's CRDs are installed")
	authn := &auth.Cached{Authenticator: auth.TokenReview{Client: k.Self.AuthenticationV1().TokenReviews()},
		Clock: realClock{}, TTL: 10 * time.Second, RejectedTTL: time.Second, MaxEntries: 1000}
	log := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
	apiServer, err = server.New(k, authn, server.Options{UnaryTimeout: 30 * time.Second, MaxRequestBytes: 4 << 20, Log: log})
	Expect(err).NotTo(HaveOccurred())
	apiServer.SetReady(true)
	httpServer = httptest.NewUnstartedServer(apiServer.Handler)
	httpServer.EnableHTTP2 = true
	httpServer.StartTLS()
	apiURL = httpServer.URL
})

var _ = AfterSuite(func() {
	if httpServer != nil {
		httpServer.Close()
	}
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }

// httpClientFor returns an HTTP/2 client of the test server that sends token.
func httpClientFor(token string) *http.Client {
	hc := httpServer.Client()
	return &http.Client{Transport: clientconfig.BearerTransport{Token: token, Base: hc.Transport}}
}

const testRuntime = `apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-distributed
  labels: {trainer.kubeflow.org/framework: torch}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  runPolicy: {activeDeadlineSeconds: 7200, ttlSecondsAfterFinished: 86400}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
                  resources: {limits: {nvidia.com/gpu: "1"}}
`

func applyYAML(ctx context.Context, doc string) {
	GinkgoHelper()
	objs, err := kilntesting.DecodeManifests([]byte(doc))
	Expect(err).NotTo(HaveOccurred())
	for _, u := range objs {
		Expect(admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("test"), client.ForceOwnership)).To(Succeed())
	}
}

func applyFile(ctx context.Context, path string) {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	applyYAML(ctx, string(data))
}

func createNamespace(ctx context.Context, name string) {
	GinkgoHelper()
	Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
}

// serviceAccount creates a ServiceAccount and returns a token of it.
func serviceAccount(ctx context.Context, ns, name string) string {
	GinkgoHelper()
	Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))).To(Succeed())
	tr, err := adminCS.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

func bindCluster(ctx context.Context, name, role, saNS, sa string) {
	GinkgoHelper()
	applyYAML(ctx, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: `+name+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: `+role+`}
subjects: [{kind: ServiceAccount, namespace: `+saNS+`, name: `+sa+`}]`)
}

func bindNamespace(ctx context.Context, ns, name, role, saNS, sa string) {
	GinkgoHelper()
	applyYAML(ctx, `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: `+name+`, namespace: `+ns+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: `+role+`}
subjects: [{kind: ServiceAccount, namespace: `+saNS+`, name: `+sa+`}]`)
}

// warningPolicy warns of every TrainJob created in team-a, as Kiln's webhook warns of a job
// that cannot start: an admission warning the API server must hand to its caller.
const warningPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: test-warn-trainjobs}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [trainer.kubeflow.org], apiVersions: ["*"], operations: [CREATE], resources: [trainjobs]}
  validations:
  - {expression: "false", message: "TrainJobs of this namespace are watched by a test policy"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: test-warn-trainjobs}
spec:
  policyName: test-warn-trainjobs
  validationActions: [Warn]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: team-a}
`
