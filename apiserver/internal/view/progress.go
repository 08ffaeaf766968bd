package view

import (
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Progress is the API's view of what a job's trainer reported (status.trainerStatus), nil
// until it reports, with the step, total steps and checkpoint read from its metrics and the
// progress deadline from the job's annotation.
func Progress(tj *trainer.TrainJob) *kilnv1.Progress {
	ts := tj.Status.TrainerStatus
	if ts == nil {
		return nil
	}
	p := &kilnv1.Progress{
		Percent: ts.ProgressPercentage, EtaSeconds: ts.EstimatedRemainingSeconds,
		UpdateTime: timestamppb.New(ts.LastUpdatedTime.Time),
	}
	var ckpt kilnv1.Checkpoint
	for _, m := range ts.Metrics {
		p.Metrics = append(p.Metrics, &kilnv1.Metric{Name: m.Name, Value: m.Value})
		switch m.Name {
		case kiln.MetricStep:
			p.Step = integer(m.Value)
		case kiln.MetricTotalSteps:
			p.TotalSteps = integer(m.Value)
		case kiln.MetricCheckpointStep:
			ckpt.Step = ptr.Deref(integer(m.Value), 0)
		case kiln.MetricCheckpointPath:
			ckpt.Path = m.Value
		}
	}
	if ckpt.Path != "" || ckpt.Step != 0 {
		p.Checkpoint = &ckpt
	}
	if v, ok := tj.Annotations[kiln.AnnotationProgressDeadline]; ok {
		if d, err := kiln.ParseProgressDeadline(v); err == nil {
			p.ProgressDeadlineSeconds = ptr.To(int64(d / time.Second))
			if last := trainer.LastSignOfLife(tj); last != nil && !Finished(tj) {
				p.StallTime = timestamppb.New(last.Add(d))
			}
		}
	}
	return p
}

// Finished says whether the job completed or failed.
func Finished(tj *trainer.TrainJob) bool {
	for _, c := range tj.Status.Conditions {
		if (c.Type == trainer.TrainJobComplete || c.Type == trainer.TrainJobFailed) && c.Status == "True" {
			return true
		}
	}
	return false
}

func integer(v string) *int64 {
	if n, ok := kiln.MetricInt(v); ok {
		return &n
	}
	return nil
}

// MetricHistory is the API's view of a TrainJobMetrics (nil: none stored yet), with the
// job's latest reported values appended as each metric's newest point when the history
// does not have them yet. only, when not empty, names the metrics wanted.
func MetricHistory(h *kiln.TrainJobMetrics, tj *trainer.TrainJob, only []string) *kilnv1.GetTrainJobMetricsResponse {
	out := &kilnv1.GetTrainJobMetricsResponse{}
	wanted := func(name string) bool {
		if len(only) == 0 {
			return true
		}
		for _, o := range only {
			if o == name {
				return true
			}
		}
		return false
	}
	byName := map[string]*kilnv1.MetricSeries{}
	if h != nil {
		out.Reports = h.Status.Reports
		if h.Status.LastUpdateTime != nil {
			out.UpdateTime = timestamppb.New(h.Status.LastUpdateTime.Time)
		}
		for _, s := range h.Series {
			if !wanted(s.Name) {
				continue
			}
			ms := &kilnv1.MetricSeries{Name: s.Name, Stride: s.Stride}
			for i := range s.Times {
				f, err := strconv.ParseFloat(s.Values[i], 64)
				if err != nil {
					continue
				}
				pt := &kilnv1.MetricPoint{Time: timestamppb.New(time.Unix(s.Times[i], 0)), Value: f}
				if i < len(s.Steps) && s.Steps[i] >= 0 {
					pt.Step = ptr.To(s.Steps[i])
				}
				ms.Points = append(ms.Points, pt)
			}
			out.Series = append(out.Series, ms)
			byName[s.Name] = ms
		}
	}
	if tj == nil {
		return out
	}
	for _, s := range LatestPoints(tj) {
		if !wanted(s.Name) {
			continue
		}
		ms := byName[s.Name]
		if ms == nil {
			ms = &kilnv1.MetricSeries{Name: s.Name, Stride: 1}
			out.Series = append(out.Series, ms)
			byName[s.Name] = ms
		}
		pt := s.Points[0]
		if n := len(ms.Points); n == 0 || ms.Points[n-1].GetTime().AsTime().Before(pt.GetTime().AsTime()) {
			ms.Points = append(ms.Points, pt)
		}
	}
	if ts := tj.Status.TrainerStatus; ts != nil && (out.UpdateTime == nil || out.UpdateTime.AsTime().Before(ts.LastUpdatedTime.Time)) {
		out.UpdateTime = timestamppb.New(ts.LastUpdatedTime.Time)
	}
	return out
}

// LatestPoints are the numeric metrics of the job's latest report, one point each.
func LatestPoints(tj *trainer.TrainJob) []*kilnv1.MetricSeries {
	ts := tj.Status.TrainerStatus
	if ts == nil {
		return nil
	}
	var step *int64
	for _, m := range ts.Metrics {
		if m.Name == kiln.MetricStep {
			step = integer(m.Value)
		}
	}
	var out []*kilnv1.MetricSeries
	for _, m := range ts.Metrics {
		if !kiln.Charted(m.Name) {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(m.Value), 64)
		if err != nil {
			continue
		}
		out = append(out, &kilnv1.MetricSeries{Name: m.Name, Stride: 1, Points: []*kilnv1.MetricPoint{{
			Time: timestamppb.New(ts.LastUpdatedTime.Time), Step: step, Value: f,
		}}})
	}
	return out
}
