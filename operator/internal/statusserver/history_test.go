package statusserver

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func status(at time.Time, metrics ...string) *trainer.TrainerStatus {
	ts := &trainer.TrainerStatus{LastUpdatedTime: metav1.NewTime(at)}
	for i := 0; i+1 < len(metrics); i += 2 {
		ts.Metrics = append(ts.Metrics, trainer.Metric{Name: metrics[i], Value: metrics[i+1]})
	}
	return ts
}

// A run of any length keeps at most MaxPointsPerSeries points per metric, spread evenly
// over all of it: the first report is kept, and the gaps between kept reports are equal.
func TestFoldBoundsAndSpreadsTheHistory(t *testing.T) {
	for _, n := range []int{1, 499, 500, 501, 12_345, 100_000} {
		h := &kiln.TrainJobMetrics{}
		var batch []report
		for i := range n {
			batch = append(batch, reportOf(status(t0.Add(time.Duration(i)*time.Second), "step", strconv.Itoa(i), "loss", fmt.Sprint(1/float64(i+1)))))
			if len(batch) == 97 { // folded in batches, as the writer does
				fold(h, batch)
				batch = nil
			}
		}
		fold(h, batch)
		if len(h.Series) != 1 || h.Series[0].Name != "loss" {
			t.Fatalf("%d reports: series %+v, want loss only (step is the x axis)", n, h.Series)
		}
		s := h.Series[0]
		if len(s.Times) > kiln.MaxPointsPerSeries || len(s.Times) != len(s.Values) || len(s.Steps) != len(s.Times) {
			t.Fatalf("%d reports: %d times, %d values, %d steps; want as many, at most %d", n, len(s.Times), len(s.Values), len(s.Steps), kiln.MaxPointsPerSeries)
		}
		if s.Count != int64(n) || h.Status.Reports != int64(n) {
			t.Errorf("%d reports: counted %d (series) and %d (history)", n, s.Count, h.Status.Reports)
		}
		for i, step := range s.Steps {
			if step != int64(i)*s.Stride {
				t.Fatalf("%d reports, stride %d: point %d is step %d, want %d", n, s.Stride, i, step, int64(i)*s.Stride)
			}
		}
		if n > kiln.MaxPointsPerSeries && len(s.Times) < kiln.MaxPointsPerSeries/4 {
			t.Errorf("%d reports: only %d points kept", n, len(s.Times))
		}
		if last := s.Steps[len(s.Steps)-1]; int64(n)-last > s.Stride {
			t.Errorf("%d reports: the last point is step %d, more than a stride (%d) before the end", n, last, s.Stride)
		}
	}
}

func TestFoldKeepsNumbersOnly(t *testing.T) {
	h := &kiln.TrainJobMetrics{}
	long := "0.12345678901234567890123456789012345"
	fold(h, []report{reportOf(status(t0, "loss", " 0.5 ", "phase", "warmup", "checkpoint_path", "/ckpt/step-1", "acc", long, "epoch", "1.5",
		"grad_norm", "NaN", "lr", "+Inf", "kl", "-infinity"))})
	got := map[string]string{}
	for _, s := range h.Series {
		got[s.Name] = s.Values[0]
		if len(s.Steps) != 0 {
			t.Errorf("%s has steps %v without a step metric", s.Name, s.Steps)
		}
	}
	want := map[string]string{"loss": "0.5", "acc": "0.123456789", "epoch": "1.5"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series %v, want %v", got, want)
	}
}

func TestFoldBoundsTheSeries(t *testing.T) {
	h := &kiln.TrainJobMetrics{}
	var metrics []string
	for i := range 100 {
		metrics = append(metrics, fmt.Sprintf("m%03d", i), "1")
	}
	fold(h, []report{reportOf(status(t0, metrics...))})
	if len(h.Series) != kiln.MaxMetricSeries || h.Status.SeriesCount != kiln.MaxMetricSeries {
		t.Errorf("%d series (count %d), want %d", len(h.Series), h.Status.SeriesCount, kiln.MaxMetricSeries)
	}
}

// Steps appear once the trainer reports one; earlier points get -1 (unknown).
func TestFoldStepsStartLate(t *testing.T) {
	h := &kiln.TrainJobMetrics{}
	fold(h, []report{reportOf(status(t0, "loss", "1")), reportOf(status(t0.Add(time.Second), "loss", "0.9", "step", "7"))})
	if s := h.Series[0]; fmt.Sprint(s.Steps) != "[-1 7]" || fmt.Sprint(s.Times) != fmt.Sprint([]int64{t0.Unix(), t0.Unix() + 1}) {
		t.Errorf("steps %v times %v", s.Steps, s.Times)
	}
}
