package controller_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kiln-ml/kiln/operator/internal/controller/crontrainjob"
	"github.com/kiln-ml/kiln/operator/internal/controller/trainjob"
)

// metricNames are the names the collectors describe.
func metricNames(cs ...prometheus.Collector) map[string]bool {
	names := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 16)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				names[m[1]] = true
			}
		}
	}
	return names
}

// referencedMetrics are the kiln_* metric names a file's PromQL uses (a histogram's
// _bucket, _sum and _count series under the histogram's name).
func referencedMetrics(t *testing.T, path, prefix string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(prefix+`[a-z_]*`).FindAllString(string(data), -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			m = strings.TrimSuffix(m, suffix)
		}
		out[m] = true
	}
	return out
}

// The chart's dashboard and alerts use only metrics the operator serves, and the docs list
// every one it serves: a renamed metric breaks this test, not a dashboard in production.
func TestDashboardAndAlertsUseServedMetrics(t *testing.T) {
	served := metricNames(append(trainjob.Metrics(), crontrainjob.Metrics()...)...)
	const chart = "../../../charts/kiln/"
	prefix := `kiln_(?:trainjob|crontrainjob)`
	for _, f := range []string{chart + "dashboards/kiln.json", chart + "templates/monitoring.yaml"} {
		used := referencedMetrics(t, f, prefix)
		if len(used) == 0 {
			t.Errorf("%s uses none of the operator's metrics", f)
		}
		for m := range used {
			if !served[m] {
				t.Errorf("%s uses %s, which the operator does not serve", f, m)
			}
		}
	}
	docs := referencedMetrics(t, "../../../docs/observability.md", prefix)
	for m := range served {
		if !docs[m] {
			t.Errorf("docs/observability.md does not list %s", m)
		}
	}
}
