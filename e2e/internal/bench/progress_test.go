package bench

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
)

// A trainer whose 5th of 120 posts was refused (429) had 119 reports accepted: its history
// is complete with 119, though its last accepted step is 120. One with a report missing is
// not, nor one whose loss series is absent.
func TestHistoriesComplete(t *testing.T) {
	history := func(job string, count int64) kiln.TrainJobMetrics {
		h := kiln.TrainJobMetrics{ObjectMeta: metav1.ObjectMeta{Name: job}}
		if count > 0 {
			h.Series = []kiln.MetricSeries{{Name: "step", Count: 200}, {Name: "loss", Count: count}}
		}
		return h
	}
	histories := []kiln.TrainJobMetrics{history("refused-once", 119), history("all", 120), history("one-missing", 118), history("no-loss", 0)}
	accepted := map[string]int{"refused-once": 119, "all": 120, "one-missing": 119, "no-loss": 3}
	if got := historiesComplete(histories, accepted); got != 2 {
		t.Fatalf("historiesComplete = %d, want 2 (refused-once and all)", got)
	}
}
