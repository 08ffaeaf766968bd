package integration

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/statusserver"
)

// The status server against a real apiserver: real projected ServiceAccount tokens bound to
// real pods (TokenRequest), judged by TokenReview, run as the operator's ServiceAccount with
// its generated RBAC.
var _ = Describe("Status server", Ordered, func() {
	var (
		base     string
		web      *http.Client
		stop     context.CancelFunc
		done     chan struct{}
		ns, ns2  string
		job      *trainer.TrainJob
		good     string
		cs       *kubernetes.Clientset
		podOfJob *corev1.Pod
	)
	start := func() {
		ctx, cancel := context.WithCancel(context.Background())
		c, err := client.New(opCfg, client.Options{Scheme: k8s.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		srv := statusserver.New(c, statusserver.Options{
			BindAddress: "127.0.0.1:0", CertDir: testEnv.WebhookInstallOptions.LocalServingCertDir,
			Writer: statusserver.WriterOptions{StatusInterval: 500 * time.Millisecond, HistoryInterval: time.Second},
		})
		// Not ready (the operator's readyz) until it listens.
		Expect(srv.ReadyChecker(nil)).To(MatchError(ContainSubstring("not listening")))
		stop, done = cancel, make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(srv.Start(ctx)).To(Succeed())
		}()
		base = "https://" + srv.Addr().String()
		Expect(srv.ReadyChecker(nil)).To(Succeed())
	}
	stopServer := func() {
		stop()
		Eventually(done).Should(BeClosed())
	}
	var postTo func(token, namespace, name string, body any) (int, string, http.Header)
	post := func(token string, body any) (int, string, http.Header) {
		GinkgoHelper()
		return postTo(token, job.Namespace, job.Name, body)
	}
	postTo = func(token, namespace, name string, body any) (int, string, http.Header) {
		GinkgoHelper()
		data, ok := body.([]byte)
		if !ok {
			var err error
			data, err = json.Marshal(body)
			Expect(err).NotTo(HaveOccurred())
		}
		req, err := http.NewRequest(http.MethodPost, base+trainer.StatusPath(namespace, name), bytes.NewReader(data))
		Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := web.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(out), res.Header
	}
	pod := func(ctx context.Context, namespace, name, jobSet string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: jobSet}},
			Spec:       corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{Name: "node", Image: "trainer"}}},
		}
		Expect(k8s.Create(ctx, p)).To(Succeed())
		return p
	}
	token := func(ctx context.Context, p *corev1.Pod, audience string) string {
		tr, err := cs.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
		}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}
	update := func(loss string) map[string]any {
		return map[string]any{"trainerStatus": map[string]any{
			"progressPercentage": 40, "estimatedRemainingSeconds": 90,
			"metrics":         []map[string]string{{"name": "loss", "value": loss}, {"name": "step", "value": "400"}},
			"lastUpdatedTime": time.Now().UTC().Format(time.RFC3339),
		}}
	}
	trainerStatus := func(ctx context.Context) *trainer.TrainerStatus {
		got := &trainer.TrainJob{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), got)).To(Succeed())
		return got.Status.TrainerStatus
	}

	BeforeAll(func(ctx context.Context) {
		var err error
		cs, err = kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(testEnv.WebhookInstallOptions.LocalServingCAData)).To(BeTrue())
		web = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		ns, ns2 = newNamespace(ctx), newNamespace(ctx)
		for _, n := range []string{ns, ns2} {
			// No ServiceAccount controller runs here.
			Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "default"}})).To(Succeed())
		}
		namespacedTorchRuntime(ctx, ns, "torch")
		job = newTrainJob(ns, "job", "torch")
		Expect(k8s.Create(ctx, job)).To(Succeed())
		podOfJob = pod(ctx, ns, "job-node-0-0-abcde", "job")
		good = token(ctx, podOfJob, trainer.TokenAudience(ns, "job"))
		start()
		DeferCleanup(stopServer)
	})

	It("writes the status of a pod of the job, from the token the kubelet projects", func(ctx context.Context) {
		code, body, _ := post(good, update("0.5"))
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring(`"progressPercentage":40`))
		Eventually(ctx, func(g Gomega) {
			ts := trainerStatus(ctx)
			g.Expect(ts).NotTo(BeNil())
			g.Expect(*ts.ProgressPercentage).To(BeEquivalentTo(40))
			g.Expect(*ts.EstimatedRemainingSeconds).To(BeEquivalentTo(90))
			g.Expect(ts.Metrics).To(ContainElement(trainer.Metric{Name: "loss", Value: "0.5"}))
		}).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			h := &kiln.TrainJobMetrics{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), h)).To(Succeed())
			g.Expect(metav1.IsControlledBy(h, job)).To(BeTrue(), "the history is owned by its TrainJob")
			g.Expect(h.Series).To(HaveLen(1))
			g.Expect(h.Series[0].Values).To(Equal([]string{"0.5"}))
			g.Expect(h.Series[0].Steps).To(Equal([]int64{400}))
		}).Should(Succeed())
	})

	// The Kubeflow SDK's raw protocol reports metrics without a step: the curve is kept,
	// its points without steps (a CEL rule once refused such a series as written).
	It("keeps the curve of a trainer that reports no step", func(ctx context.Context) {
		raw := newTrainJob(ns, "raw", "torch")
		Expect(k8s.Create(ctx, raw)).To(Succeed())
		p := pod(ctx, ns, "raw-node-0-0-abcde", "raw")
		code, body, _ := postTo(token(ctx, p, trainer.TokenAudience(ns, "raw")), ns, "raw", map[string]any{"trainerStatus": map[string]any{
			"progressPercentage": 100, "metrics": []map[string]string{{"name": "accuracy", "value": "0.9"}},
			"lastUpdatedTime": time.Now().UTC().Format(time.RFC3339),
		}})
		Expect(code).To(Equal(http.StatusOK), body)
		Eventually(ctx, func(g Gomega) {
			h := &kiln.TrainJobMetrics{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(raw), h)).To(Succeed())
			g.Expect(h.Series).To(ConsistOf(And(HaveField("Name", "accuracy"), HaveField("Values", []string{"0.9"}), HaveField("Steps", BeEmpty()))))
		}).Should(Succeed())
	})

	It("refuses every other caller with the reason, and writes nothing", func(ctx context.Context) {
		other := pod(ctx, ns, "other-node-0-0-abcde", "other")
		elsewhere := pod(ctx, ns2, "job-node-0-0-abcde", "job")
		signed := expiredToken(podOfJob, trainer.TokenAudience(ns, "job"))
		big := map[string]any{"trainerStatus": map[string]any{"metrics": func() []map[string]string {
			var ms []map[string]string
			for i := range 257 {
				ms = append(ms, map[string]string{"name": fmt.Sprint("m", i), "value": "1"})
			}
			return ms
		}()}}
		for _, tc := range []struct {
			name, token string
			body        any
			code        int
			says        string
		}{
			{"no token", "", update("9"), http.StatusUnauthorized, "no bearer token"},
			{"a token for another TrainJob", token(ctx, other, trainer.TokenAudience(ns, "other")), update("9"), http.StatusUnauthorized, "is not this TrainJob's"},
			{"a pod of another TrainJob", token(ctx, other, trainer.TokenAudience(ns, "job")), update("9"), http.StatusForbidden, "is not a pod of TrainJob " + ns + "/job"},
			{"a pod in another namespace", token(ctx, elsewhere, trainer.TokenAudience(ns, "job")), update("9"), http.StatusForbidden, "whose namespace is not the TrainJob's"},
			{"the Kubernetes API's audience", token(ctx, podOfJob, "https://kubernetes.default.svc"), update("9"), http.StatusUnauthorized, "is not this TrainJob's"},
			{"an expired token", signed, update("9"), http.StatusUnauthorized, "token expired at"},
			{"257 metrics", good, big, http.StatusBadRequest, "trainerStatus.metrics: Too many: 257: must have at most 256 items"},
			{"a value too long", good, map[string]any{"trainerStatus": map[string]any{"metrics": []map[string]string{{"name": "loss", "value": strings.Repeat("9", 65)}}}}, http.StatusBadRequest, "trainerStatus.metrics[0].value: Too long"},
			{"a body over 64 KiB", good, bytes.Repeat([]byte(" "), 70_000), http.StatusRequestEntityTooLarge, "larger than 65536 bytes"},
		} {
			code, body, _ := post(tc.token, tc.body)
			Expect(code).To(Equal(tc.code), "%s: %s", tc.name, body)
			Expect(body).To(ContainSubstring(tc.says), tc.name)
			Expect(body).To(ContainSubstring(`"kind":"Status"`), tc.name)
		}
		Consistently(ctx, func(g Gomega) {
			g.Expect(trainerStatus(ctx).Metrics).To(ContainElement(trainer.Metric{Name: "loss", Value: "0.5"}), "a refused update was written")
		}, "2s").Should(Succeed())
	})

	// A thousand trainers starting together queue for the server's API budget. A post whose
	// token cannot be checked in time is told to come back, and answered before the
	// connection's write deadline: past it, a write broke the TLS stream and the trainer saw
	// "tls: bad record MAC" instead of an answer (docs/performance.md, "The status server's
	// token reviews").
	It("tells a trainer to retry when its token cannot be checked in time, before the connection's deadline", func(ctx context.Context) {
		slow := rest.CopyConfig(opCfg)
		slow.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if strings.HasSuffix(req.URL.Path, "/tokenreviews") {
					<-req.Context().Done() // an apiserver that does not answer in time
					return nil, req.Context().Err()
				}
				return rt.RoundTrip(req)
			})
		}
		c, err := client.New(slow, client.Options{Scheme: k8s.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		srv := statusserver.New(c, statusserver.Options{
			BindAddress: "127.0.0.1:0", CertDir: testEnv.WebhookInstallOptions.LocalServingCertDir, AnswerWithin: time.Second,
		})
		srvCtx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(stopped)
			Expect(srv.Start(srvCtx)).To(Succeed())
		}()
		DeferCleanup(func() {
			cancel()
			Eventually(stopped).Should(BeClosed())
		})
		before := counter("kiln_progress_updates_refused_total", "reason", "unavailable")
		data, err := json.Marshal(update("7"))
		Expect(err).NotTo(HaveOccurred())
		for range 2 { // no verdict is kept: the second post asks again
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+srv.Addr().String()+trainer.StatusPath(ns, "job"), bytes.NewReader(data))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+good)
			res, err := web.Do(req)
			Expect(err).NotTo(HaveOccurred(), "an answer, not a broken connection")
			body, err := io.ReadAll(res.Body)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Body.Close()).To(Succeed())
			Expect(res.StatusCode).To(Equal(http.StatusServiceUnavailable), string(body))
			retry, err := strconv.Atoi(res.Header.Get("Retry-After"))
			Expect(err).NotTo(HaveOccurred(), "Retry-After in seconds")
			Expect(retry).To(And(BeNumerically(">=", 2), BeNumerically("<=", 10)))
			Expect(string(body)).To(And(ContainSubstring(`"reason":"ServiceUnavailable"`), ContainSubstring("could not check the token now"),
				ContainSubstring("--status-server-qps")))
		}
		Expect(counter("kiln_progress_updates_refused_total", "reason", "unavailable")).To(Equal(before + 2))
		Expect(trainerStatus(ctx)).To(Or(BeNil(), HaveField("Metrics", Not(ContainElement(trainer.Metric{Name: "loss", Value: "7"})))), "nothing written")
	})

	It("coalesces a burst into a few writes, and refuses a job that posts too fast", func(ctx context.Context) {
		before := counter("kiln_progress_writes_total", "kind", "status", "result", "ok")
		var ok, limited int
		for i := range 40 {
			code, body, header := post(good, update(fmt.Sprintf("0.%03d", i)))
			switch code {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				limited++
				Expect(header.Get("Retry-After")).NotTo(BeEmpty())
				Expect(body).To(ContainSubstring("post from one rank only"))
			default:
				Fail(fmt.Sprintf("%d: %s", code, body))
			}
		}
		Expect(limited).To(BeNumerically(">", 0), "40 posts at once from one job are rate limited")
		Expect(ok).To(BeNumerically(">=", 20))
		Eventually(ctx, func(g Gomega) {
			g.Expect(trainerStatus(ctx).Metrics).To(ContainElement(HaveField("Value", Not(Equal("0.5")))))
		}).Should(Succeed())
		time.Sleep(time.Second)
		writes := counter("kiln_progress_writes_total", "kind", "status", "result", "ok") - before
		Expect(writes).To(BeNumerically("<=", 6), "%d accepted posts in about a second made %v status writes", ok, writes)
	})

	It("keeps the history across a restart of the server", func(ctx context.Context) {
		h := &kiln.TrainJobMetrics{}
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), h)).To(Succeed())
			g.Expect(h.Status.Reports).To(BeNumerically(">=", 21))
		}).Should(Succeed())
		reports := h.Status.Reports
		time.Sleep(1200 * time.Millisecond) // past the per-job rate's burst
		code, body, _ := post(good, update("0.25"))
		Expect(code).To(Equal(http.StatusOK), body)
		stopServer() // writes what it holds
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), h)).To(Succeed())
		Expect(h.Status.Reports).To(Equal(reports+1), "the report answered 200 before the stop is stored")
		start()
		code, body, _ = post(good, update("0.125"))
		Expect(code).To(Equal(http.StatusOK), body)
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), h)).To(Succeed())
			g.Expect(h.Status.Reports).To(Equal(reports+2), "the restarted server continues the stored history")
		}).Should(Succeed())
	})
})

// expiredToken signs, with the apiserver's own ServiceAccount key, a token like the kubelet's
// for pod p that expired a minute ago: TokenRequest cannot issue one that short.
func expiredToken(p *corev1.Pod, audience string) string {
	GinkgoHelper()
	keyPEM, err := os.ReadFile(filepath.Join(testEnv.ControlPlane.APIServer.CertDir, "sa-signer.key"))
	Expect(err).NotTo(HaveOccurred())
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	Expect(err).NotTo(HaveOccurred())
	now := time.Now()
	enc := func(v any) string {
		data, err := json.Marshal(v)
		Expect(err).NotTo(HaveOccurred())
		return base64.RawURLEncoding.EncodeToString(data)
	}
	claims := map[string]any{
		"iss": testEnv.ControlPlane.APIServer.SecureServing.URL("https", "/").String(), "aud": []string{audience},
		"sub": "system:serviceaccount:" + p.Namespace + ":default", "iat": now.Add(-time.Hour).Unix(), "nbf": now.Add(-time.Hour).Unix(), "exp": now.Add(-time.Minute).Unix(),
		"kubernetes.io": map[string]any{"namespace": p.Namespace, "pod": map[string]any{"name": p.Name, "uid": string(p.UID)},
			"serviceaccount": map[string]any{"name": "default"}},
	}
	var sig []byte
	var signing string
	switch k := key.(type) {
	case *rsa.PrivateKey:
		signing = enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + enc(claims)
		sum := sha256.Sum256([]byte(signing))
		sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
	case *ecdsa.PrivateKey: // ES256: r and s, 32 bytes each
		signing = enc(map[string]string{"alg": "ES256", "typ": "JWT"}) + "." + enc(claims)
		sum := sha256.Sum256([]byte(signing))
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, k, sum[:])
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	default:
		Fail(fmt.Sprintf("ServiceAccount key of type %T", key))
	}
	Expect(err).NotTo(HaveOccurred())
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// counter reads a counter of the operator's metrics registry, by its labels.
func counter(name string, labels ...string) float64 {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
