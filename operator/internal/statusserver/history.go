package statusserver

import (
	"math"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// report is one accepted update, as the history keeps it: its time, its step (when the
// trainer reported a step metric) and its numeric metrics.
type report struct {
	time   time.Time
	step   *int64
	values []namedValue
}

type namedValue struct{ name, value string }

// maxValueLength bounds a stored value; longer decimal numbers are rounded to 10 digits.
const maxValueLength = 32

// reportOf keeps the numeric metrics of a trainer status.
func reportOf(ts *trainer.TrainerStatus) report {
	r := report{time: ts.LastUpdatedTime.Time}
	for _, m := range ts.Metrics {
		if m.Name == kiln.MetricStep {
			if step, ok := kiln.MetricInt(m.Value); ok {
				r.step = &step
			}
		}
		if !kiln.Charted(m.Name) {
			continue
		}
		v := strings.TrimSpace(m.Value)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			continue // a curve has finite points only; the status keeps the value as sent
		}
		if len(v) > maxValueLength {
			v = strconv.FormatFloat(f, 'g', 10, 64)
		}
		r.values = append(r.values, namedValue{m.Name, v})
	}
	return r
}

// fold adds reports, oldest first, to a history. Each metric keeps the reports whose
// number (counting that metric's reports from 0) is a multiple of its stride; when a series
// reaches MaxPointsPerSeries points it drops every other point and doubles its stride, so
// that whatever the run's length its points stay spread evenly over all of it. Metrics
// beyond the first MaxMetricSeries are not kept.
func fold(h *kiln.TrainJobMetrics, reports []report) {
	index := map[string]int{}
	for i := range h.Series {
		index[h.Series[i].Name] = i
	}
	for _, r := range reports {
		h.Status.Reports++
		if h.Status.LastUpdateTime == nil || r.time.After(h.Status.LastUpdateTime.Time) {
			h.Status.LastUpdateTime = &metav1.Time{Time: r.time.Truncate(time.Second)}
		}
		for _, nv := range r.values {
			i, ok := index[nv.name]
			if !ok {
				if len(h.Series) >= kiln.MaxMetricSeries {
					continue
				}
				h.Series = append(h.Series, kiln.MetricSeries{Name: nv.name, Stride: 1, Times: []int64{}, Values: []string{}})
				i = len(h.Series) - 1
				index[nv.name] = i
			}
			s := &h.Series[i]
			if s.Stride < 1 {
				s.Stride = 1
			}
			n := s.Count
			s.Count++
			if n%s.Stride != 0 {
				continue
			}
			appendPoint(s, r.time.Unix(), r.step, nv.value)
			if len(s.Times) >= kiln.MaxPointsPerSeries {
				halve(s)
			}
		}
	}
	h.Status.SeriesCount = int32(len(h.Series))
}

// appendPoint adds a point; steps stay empty until the first point with a step, and then
// cover every point (an earlier point without one gets -1, "unknown").
func appendPoint(s *kiln.MetricSeries, t int64, step *int64, value string) {
	switch {
	case step != nil && len(s.Steps) < len(s.Times):
		for len(s.Steps) < len(s.Times) {
			s.Steps = append(s.Steps, -1)
		}
		s.Steps = append(s.Steps, *step)
	case step != nil:
		s.Steps = append(s.Steps, *step)
	case len(s.Steps) > 0:
		s.Steps = append(s.Steps, -1)
	}
	s.Times = append(s.Times, t)
	s.Values = append(s.Values, value)
}

// halve keeps the points at even positions (reports whose number is a multiple of twice
// the stride) and doubles the stride.
func halve(s *kiln.MetricSeries) {
	keep := func(n int) int { return (n + 1) / 2 }
	for i := 0; i < keep(len(s.Times)); i++ {
		s.Times[i] = s.Times[2*i]
		s.Values[i] = s.Values[2*i]
		if len(s.Steps) > 0 {
			s.Steps[i] = s.Steps[2*i]
		}
	}
	s.Times, s.Values = s.Times[:keep(len(s.Times))], s.Values[:keep(len(s.Values))]
	if len(s.Steps) > 0 {
		s.Steps = s.Steps[:keep(len(s.Steps))]
	}
	s.Stride *= 2
}
