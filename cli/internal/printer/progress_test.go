package printer

import (
	"math"
	"testing"
	"time"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

func TestRemaining(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                   "0s",
		42 * time.Second:               "42s",
		5 * time.Minute:                "5m",
		5*time.Minute + 10*time.Second: "5m10s",
		2*time.Hour + 3*time.Minute:    "2h3m",
		2*time.Hour + 59*time.Second:   "2h",
		76 * time.Hour:                 "3d4h",
	} {
		if got := Remaining(d); got != want {
			t.Errorf("Remaining(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestProgressCells(t *testing.T) {
	pct, step, eta := int32(42), int64(1200), int32(310)
	running := func(p *kilnv1.Progress) *kilnv1.TrainJob {
		return &kilnv1.TrainJob{Status: &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_RUNNING, Progress: p}}
	}
	for name, tc := range map[string]struct {
		job               *kilnv1.TrainJob
		wantCell, wantETA string
	}{
		"not reported":      {job: running(nil), wantCell: "-", wantETA: "-"},
		"percent and ETA":   {job: running(&kilnv1.Progress{Percent: &pct, Step: &step, EtaSeconds: &eta}), wantCell: "42%", wantETA: "5m10s"},
		"steps, no percent": {job: running(&kilnv1.Progress{Step: &step}), wantCell: "step 1200", wantETA: "-"},
		"finished: no ETA": {job: &kilnv1.TrainJob{Status: &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_FAILED, Progress: &kilnv1.Progress{Percent: &pct, EtaSeconds: &eta}}},
			wantCell: "42%", wantETA: "-"},
	} {
		if cell, eta := ProgressCell(tc.job.GetStatus().GetProgress()), ETACell(tc.job); cell != tc.wantCell || eta != tc.wantETA {
			t.Errorf("%s: %q, %q; want %q, %q", name, cell, eta, tc.wantCell, tc.wantETA)
		}
	}
}

func TestBarAndNumber(t *testing.T) {
	for pct, want := range map[int32]string{0: "[----------]", 45: "[#####-----]", 100: "[##########]", 120: "[##########]"} {
		if got := Bar(pct, 10); got != want {
			t.Errorf("Bar(%d) = %q, want %q", pct, got, want)
		}
	}
	for v, want := range map[string]string{"0.5321098741": "0.5321", "12345.678": "1.235e+04", "2": "2", "nan": "NaN", "warmup": "warmup"} {
		if got := Number(v); got != want {
			t.Errorf("Number(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestSparkline(t *testing.T) {
	for name, tc := range map[string]struct {
		values []float64
		width  int
		want   string
	}{
		"one a value":    {values: []float64{0, 1, 2, 3, 4, 5, 6, 7}, width: 60, want: "▁▂▃▄▅▆▇█"},
		"resampled":      {values: []float64{0, 0, 7, 7, 0, 0, 7, 7}, width: 4, want: "▁█▁█"},
		"uneven buckets": {values: []float64{1, 1, 1, 5, 5}, width: 2, want: "▁█"},
		"flat":           {values: []float64{3, 3, 3}, width: 60, want: "▁▁▁"},
		"not finite":     {values: []float64{math.NaN(), 0, math.Inf(1), 7}, width: 60, want: "▁█"},
		"nothing":        {values: nil, width: 60, want: ""},
	} {
		if got := Sparkline(tc.values, tc.width); got != tc.want {
			t.Errorf("%s: Sparkline() = %q, want %q", name, got, tc.want)
		}
	}
}
