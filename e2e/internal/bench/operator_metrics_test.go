package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

const metricsBefore = `# TYPE kiln_trainjob_timer_lag_seconds histogram
kiln_trainjob_timer_lag_seconds_bucket{timer="deadline",le="0.25"} 1
kiln_trainjob_timer_lag_seconds_bucket{timer="deadline",le="0.5"} 1
kiln_trainjob_timer_lag_seconds_bucket{timer="deadline",le="1"} 2
kiln_trainjob_timer_lag_seconds_bucket{timer="deadline",le="+Inf"} 2
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="0.25"} 7
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="0.5"} 7
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="1"} 7
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="+Inf"} 7
kiln_trainjob_timer_lag_seconds_sum{timer="deadline"} 1.2
workqueue_queue_duration_seconds_bucket{controller="trainjob",name="trainjob",le="0.1"} 10
workqueue_queue_duration_seconds_bucket{controller="trainjob",name="trainjob",le="1"} 10
workqueue_queue_duration_seconds_bucket{controller="trainjob",name="trainjob",le="+Inf"} 10
controller_runtime_reconcile_time_seconds_bucket{controller="trainjob",le="0.1"} 10
controller_runtime_reconcile_time_seconds_bucket{controller="trainjob",le="+Inf"} 10
`

// 100 more deadlines: 50 within 0.25 s, 40 more within 0.5 s, 9 within 1 s, 1 later.
const metricsAfter = `kiln_trainjob_timer_lag_seconds_bucket{timer="deadline",le="0.25"} 51
kiln_trainjob_timer_lag_seconds_bucket{timer="deadline",le="0.5"} 91
kiln_trainjob_timer_lag_seconds_bucket{timer="deadline",le="1"} 101
kiln_trainjob_timer_lag_seconds_bucket{timer="deadline",le="+Inf"} 102
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="0.25"} 7
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="0.5"} 7
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="1"} 7
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="+Inf"} 7
workqueue_queue_duration_seconds_bucket{controller="trainjob",name="trainjob",le="0.1"} 110
workqueue_queue_duration_seconds_bucket{controller="trainjob",name="trainjob",le="1"} 210
workqueue_queue_duration_seconds_bucket{controller="trainjob",name="trainjob",le="+Inf"} 210
workqueue_queue_duration_seconds_bucket{controller="crontrainjob",name="crontrainjob",le="0.1"} 5
workqueue_queue_duration_seconds_bucket{controller="crontrainjob",name="crontrainjob",le="+Inf"} 9
controller_runtime_reconcile_time_seconds_bucket{controller="trainjob",le="0.1"} 210
controller_runtime_reconcile_time_seconds_bucket{controller="trainjob",le="+Inf"} 210
`

func TestHistogramQuantilesOfADifference(t *testing.T) {
	lag := parseHistogram(metricsAfter, "kiln_trainjob_timer_lag_seconds", `timer="deadline"`).
		minus(parseHistogram(metricsBefore, "kiln_trainjob_timer_lag_seconds", `timer="deadline"`))
	if got := lag.count(); got != 100 {
		t.Fatalf("count %v, want the 100 deadlines between the readings", got)
	}
	for _, tc := range []struct{ q, want float64 }{{0.5, 0.25}, {0.9, 0.5}, {0.99, 1}, {1, math.Inf(1)}} {
		if got := lag.quantile(tc.q); got != tc.want {
			t.Errorf("quantile %v: %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := (histogram{}).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("an empty histogram's quantile is %v, want NaN", got)
	}
}

func TestOperatorViewNamesEachPart(t *testing.T) {
	got := operatorView(metricsBefore, metricsAfter)
	for _, want := range []string{
		"Failed stored p50 ≤ 0.25 s, p99 ≤ 1 s after due (100 deadlines)",
		"waited in the work queue p50 ≤ 0.1 s, p99 ≤ 1 s", // 100 of 200 within 0.1 s, the rest within 1 s
		"took p50 ≤ 0.1 s, p99 ≤ 0.1 s (200 reconciles)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("operatorView = %q, want it to contain %q", got, want)
		}
	}
}

func TestOperatorViewOfTTLsCountsOnlyTheTTLsBetweenTheReadings(t *testing.T) {
	after := metricsAfter + `kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="0.25"} 27
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="0.5"} 46
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="1"} 47
kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="+Inf"} 47
`
	after = strings.NewReplacer( // the TTL buckets of metricsAfter are this reading's
		`kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="0.25"} 7`+"\n", "",
		`kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="0.5"} 7`+"\n", "",
		`kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="1"} 7`+"\n", "",
		`kiln_trainjob_timer_lag_seconds_bucket{timer="ttl",le="+Inf"} 7`+"\n", "").Replace(after)
	// 40 more TTLs: 20 within 0.25 s, 19 more within 0.5 s, 1 within 1 s.
	if got, want := operatorViewOfTTLs(metricsBefore, after), "deletion issued p50 ≤ 0.25 s, p99 ≤ 1 s after due (40 TTLs)"; got != want {
		t.Errorf("operatorViewOfTTLs = %q, want %q", got, want)
	}
}

// The first deadline is the soonest of the jobs' own: from status.startTime when the job
// has one, else from its creation; a job without a deadline does not count.
func TestFirstDeadline(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	job := func(created time.Duration, started *time.Duration, deadline *int64) trainer.TrainJob {
		tj := trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0.Add(created))}}
		tj.Spec.ActiveDeadlineSeconds = deadline
		if started != nil {
			tj.Status.StartTime = ptr.To(metav1.NewTime(t0.Add(*started)))
		}
		return tj
	}
	if got := firstDeadline(nil); !got.IsZero() {
		t.Fatalf("no jobs: %v, want zero", got)
	}
	jobs := []trainer.TrainJob{
		job(0, ptr.To(5*time.Second), ptr.To[int64](120)), // due at 125 s
		job(2*time.Second, nil, ptr.To[int64](120)),       // not started: due at 122 s at the soonest
		job(-time.Hour, nil, nil),                         // no deadline
	}
	if got, want := firstDeadline(jobs), t0.Add(122*time.Second); !got.Equal(want) {
		t.Fatalf("first deadline %v, want %v", got, want)
	}
}
