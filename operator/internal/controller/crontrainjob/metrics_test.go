package crontrainjob

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The metric names and help texts follow Prometheus' conventions (promlint).
func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Metrics()...)
	// Every vector needs a child to be gathered.
	cronRuns.WithLabelValues(RunCreated)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
