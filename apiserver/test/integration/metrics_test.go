package integration

import (
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
)

// scrape GETs /metrics with token ("" sends none) and returns the status and body.
func scrape(token string) (int, string) {
	GinkgoHelper()
	hc := httpServer.Client()
	req, err := http.NewRequest(http.MethodGet, apiURL+"/metrics", nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	Expect(err).NotTo(HaveOccurred())
	return res.StatusCode, string(body)
}

// sample is the value of the series of family name whose labels include labels (0 when
// there is none), parsed with Prometheus' own text parser.
func sample(body, name string, labels map[string]string) float64 {
	GinkgoHelper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	f, ok := families[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

var _ = Describe("Metrics", func() {
	It("serves them only to callers Kubernetes allows get on /metrics, and counts every call by procedure and code", func(ctx SpecContext) {
		prometheus := serviceAccount(ctx, "kiln-system", "prometheus")
		bindCluster(ctx, "prometheus-kiln-metrics", "kiln-metrics-reader", "kiln-system", "prometheus")

		By("no token, or a token Kubernetes rejects: 401")
		code, body := scrape("")
		Expect(code).To(Equal(http.StatusUnauthorized))
		Expect(body).To(ContainSubstring("no bearer token"))
		code, _ = scrape("not-a-token")
		Expect(code).To(Equal(http.StatusUnauthorized))

		By("a caller without the permission: 403, naming what to bind")
		code, body = scrape(tokens["alice"])
		Expect(code).To(Equal(http.StatusForbidden))
		Expect(body).To(ContainSubstring("may not get /metrics"))
		Expect(body).To(ContainSubstring("kiln-metrics-reader"))

		By("kiln-metrics-reader: the metrics, moving with the calls")
		Eventually(func() int { code, body = scrape(prometheus); return code }).Should(Equal(http.StatusOK))
		ok := map[string]string{"procedure": kilnv1connect.RuntimeServiceListRuntimesProcedure, "code": "ok"}
		unauthenticated := map[string]string{"procedure": kilnv1connect.RuntimeServiceListRuntimesProcedure, "code": "unauthenticated"}
		okBefore, unauthBefore := sample(body, "kiln_apiserver_requests_total", ok), sample(body, "kiln_apiserver_requests_total", unauthenticated)
		durationsBefore := sample(body, "kiln_apiserver_request_duration_seconds", map[string]string{"procedure": kilnv1connect.RuntimeServiceListRuntimesProcedure})

		for range 3 {
			_, err := protocols[0].as("alice").runtimes.ListRuntimes(ctx, connect.NewRequest(&kilnv1.ListRuntimesRequest{Namespace: "team-a"}))
			Expect(err).NotTo(HaveOccurred())
		}
		_, err := protocols[0].as("").runtimes.ListRuntimes(ctx, connect.NewRequest(&kilnv1.ListRuntimesRequest{}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodeUnauthenticated))

		code, body = scrape(prometheus)
		Expect(code).To(Equal(http.StatusOK))
		Expect(sample(body, "kiln_apiserver_requests_total", ok) - okBefore).To(BeEquivalentTo(3))
		Expect(sample(body, "kiln_apiserver_requests_total", unauthenticated) - unauthBefore).To(BeEquivalentTo(1))
		Expect(sample(body, "kiln_apiserver_request_duration_seconds", map[string]string{"procedure": kilnv1connect.RuntimeServiceListRuntimesProcedure}) - durationsBefore).To(BeEquivalentTo(4))
		Expect(sample(body, "go_goroutines", nil)).To(BeNumerically(">", 0), "the Go runtime's metrics")
	})
})
