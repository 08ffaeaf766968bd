package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// metricFamilies is one scrape, parsed by Prometheus' own text parser.
type metricFamilies map[string]*dto.MetricFamily

// scrapeMetrics GETs url with token ("" sends none) through hc and returns the status, and
// the parsed metrics when the status is 200.
func scrapeMetrics(ctx context.Context, hc *http.Client, url, token string) (int, string, metricFamilies) {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	Expect(err).NotTo(HaveOccurred())
	if res.StatusCode != http.StatusOK {
		return res.StatusCode, string(body), nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	Expect(err).NotTo(HaveOccurred(), "the metrics of %s parse", url)
	return res.StatusCode, string(body), families
}

// value sums the series of a family whose labels include labels: counters' and gauges'
// values, histograms' sample counts.
func (m metricFamilies) value(name string, labels map[string]string) float64 {
	var sum float64
	for _, s := range m[name].GetMetric() {
		match := true
		for k, v := range labels {
			found := false
			for _, l := range s.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case s.GetCounter() != nil:
			sum += s.GetCounter().GetValue()
		case s.GetGauge() != nil:
			sum += s.GetGauge().GetValue()
		case s.GetHistogram() != nil:
			sum += float64(s.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// operatorMetricsURL is where the operator serves its metrics: on 127.0.0.1 when it runs as
// a process, on its leader pod's IP (the real node's pod network is routed on this machine)
// when the chart installed it: only the leader counts.
func operatorMetricsURL(ctx context.Context) string {
	GinkgoHelper()
	if os.Getenv(platform.EnvInstall) != string(platform.InstallChart) {
		return fmt.Sprintf("https://127.0.0.1:%d/metrics", platform.DefaultConfig(os.Getenv("KILN_ROOT")).OperatorMetrics)
	}
	var leader string
	Eventually(ctx, func() string { leader = leaderPod(ctx); return leader }).ShouldNot(BeEmpty(), "an operator pod leads")
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace(platform.APIServerNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "operator", "app.kubernetes.io/instance": platform.ReleaseName})).To(Succeed())
	for _, p := range pods.Items {
		if p.Name == leader && p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() {
			for _, c := range p.Spec.Containers {
				for _, port := range c.Ports {
					if port.Name == "metrics" {
						return fmt.Sprintf("https://%s:%d/metrics", p.Status.PodIP, port.ContainerPort)
					}
				}
			}
		}
	}
	Fail("the leader, " + leader + ", has no metrics port or no IP")
	return ""
}

// scraper makes a ServiceAccount bound to kiln-metrics-reader, as Prometheus' would be, and
// returns its token.
func scraper(ctx context.Context, ns, name string, bind bool) string {
	GinkgoHelper()
	Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	if bind {
		crb := platform.Binding("ClusterRoleBinding", "", ns+"-"+name, "kiln-metrics-reader", ns, name)
		Expect(k8s.Create(ctx, crb)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, crb))).To(Succeed()) })
	}
	token, err := platform.ServiceAccountToken(ctx, clientset, ns, name, 3600)
	Expect(err).NotTo(HaveOccurred())
	return token
}

var _ = Describe("Observability", Label(chartMode), func() {
	It("serves metrics only to authorized scrapers, and they follow queued jobs to completion, deadline and TTL", func(ctx SpecContext) {
		ns := newNamespace(ctx, "metrics")
		smallQueue(ctx, ns)
		prometheus := scraper(ctx, ns, "prometheus", true)
		nobody := scraper(ctx, ns, "nobody", false)
		// The operator's certificate is self-signed: what is checked is the caller's token.
		insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		operator := operatorMetricsURL(ctx)
		jobs, _, kc := apiClient()
		apiHTTP, err := kc.HTTPClient()
		Expect(err).NotTo(HaveOccurred())
		apiserver := strings.TrimSuffix(kc.Server, "/") + "/metrics"

		By("refusing a scrape without a token (401) or without kiln-metrics-reader (403), on both")
		for _, s := range []struct {
			url string
			hc  *http.Client
		}{{operator, insecure}, {apiserver, apiHTTP}} {
			code, body, _ := scrapeMetrics(ctx, s.hc, s.url, "")
			Expect(code).To(Equal(http.StatusUnauthorized), "%s without a token: %s", s.url, body)
			code, body, _ = scrapeMetrics(ctx, s.hc, s.url, nobody)
			Expect(code).To(Equal(http.StatusForbidden), "%s as a ServiceAccount without kiln-metrics-reader: %s", s.url, body)
			Expect(body).To(ContainSubstring("bind a ClusterRole that allows it (the chart's kiln-metrics-reader)"), "%s names the role to bind", s.url)
		}

		var before metricFamilies
		Eventually(ctx, func(g Gomega) {
			code, body, m := scrapeMetrics(ctx, insecure, operator, prometheus)
			g.Expect(code).To(Equal(http.StatusOK), body)
			before = m
		}).Should(Succeed(), "the binding reaches the authorizer")
		_, _, apiBefore := scrapeMetrics(ctx, apiHTTP, apiserver, prometheus)

		By("running two queued jobs: one completes and its TTL deletes it, one runs into its deadline")
		const rt = "torch-distributed"
		queued := func(name string, annotations map[string]string) *trainer.TrainJob {
			return torchJob(ns, name, 1).Label(labelQueue, "queue").Suspend(true).ResourcesPerNode(gpusPerNode("1", "")).
				RuntimePatch(podPatch("node", annotations)).Obj()
		}
		done := queued("done", map[string]string{annDuration: "3s"})
		done.Spec.TTLSecondsAfterFinished = ptr.To[int32](1)
		late := queued("late", map[string]string{annDuration: "120s"})
		// Long enough to be running first (each job is counted entering running), however
		// slowly its pods start on a loaded machine: 3 s once was not.
		late.Spec.ActiveDeadlineSeconds = ptr.To[int64](15)
		Expect(k8s.Create(ctx, done)).To(Succeed())
		Expect(k8s.Create(ctx, late)).To(Succeed())
		waitCondition(ctx, ns, "late", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
		Eventually(ctx, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(done), &trainer.TrainJob{}))
		}).Should(BeTrue(), "the TTL deleted the completed job")

		By("the operator's counters and histograms moved with them")
		_, _, after := scrapeMetrics(ctx, insecure, operator, prometheus)
		moved := func(name string, labels map[string]string) float64 {
			return after.value(name, labels) - before.value(name, labels)
		}
		for _, s := range []string{"queued", "starting", "running"} {
			Expect(moved("kiln_trainjob_transitions_total", map[string]string{"state": s, "runtime": rt})).To(BeNumerically(">=", 2), "jobs entering %s", s)
		}
		Expect(moved("kiln_trainjob_transitions_total", map[string]string{"state": "complete", "runtime": rt})).To(BeNumerically(">=", 1))
		Expect(moved("kiln_trainjob_transitions_total", map[string]string{"state": "failed", "runtime": rt})).To(BeNumerically(">=", 1))
		Expect(moved("kiln_trainjob_queued_seconds", map[string]string{"runtime": rt})).To(BeNumerically(">=", 2), "the time each waited in its queue")
		Expect(moved("kiln_trainjob_startup_seconds", map[string]string{"runtime": rt})).To(BeNumerically(">=", 2), "admission to running")
		Expect(moved("kiln_trainjob_deadlines_exceeded_total", map[string]string{"runtime": rt})).To(BeNumerically(">=", 1))
		Expect(moved("kiln_trainjob_ttl_deletions_total", map[string]string{"runtime": rt})).To(BeNumerically(">=", 1))
		Expect(moved("kiln_trainjob_timer_lag_seconds", map[string]string{"timer": "deadline"})).To(BeNumerically(">=", 1))
		Expect(moved("kiln_trainjob_timer_lag_seconds", map[string]string{"timer": "ttl"})).To(BeNumerically(">=", 1))
		Expect(after.value("kiln_trainjobs", map[string]string{"state": "failed", "runtime": rt})).To(BeNumerically(">=", 1), "the job that failed its deadline is still there")
		Expect(after.value("controller_runtime_reconcile_total", map[string]string{"controller": "trainjob"})).To(BeNumerically(">", 0), "controller-runtime's own metrics")
		for _, f := range after {
			for _, s := range f.GetMetric() {
				for _, l := range s.GetLabel() {
					Expect(l.GetValue()).NotTo(Or(Equal("done"), Equal("late"), Equal(ns)), "%s has a job's name or namespace as a label", f.GetName())
				}
			}
		}

		By("the API server counted the calls")
		_, err = jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: kc.Namespace}))
		Expect(err).NotTo(HaveOccurred())
		_, _, apiAfter := scrapeMetrics(ctx, apiHTTP, apiserver, prometheus)
		list := map[string]string{"procedure": kilnv1connect.TrainJobServiceListTrainJobsProcedure, "code": "ok"}
		Expect(apiAfter.value("kiln_apiserver_requests_total", list) - apiBefore.value("kiln_apiserver_requests_total", list)).To(BeNumerically(">=", 1))
		Expect(apiAfter.value("kiln_apiserver_request_duration_seconds", map[string]string{"procedure": kilnv1connect.TrainJobServiceListTrainJobsProcedure})).To(BeNumerically(">=", 1))
	})
})
