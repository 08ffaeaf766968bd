package view

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

var p0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func reporting() *trainer.TrainJob {
	tj := kilntesting.MakeTrainJob("job", "ns").UID("u1").Annotation(kiln.AnnotationProgressDeadline, "10m").StartTime(p0).Obj()
	tj.Status.TrainerStatus = &trainer.TrainerStatus{
		ProgressPercentage: ptr.To[int32](40), EstimatedRemainingSeconds: ptr.To[int32](90),
		Metrics: []trainer.Metric{{Name: "loss", Value: "0.25"}, {Name: "step", Value: "400.0"}, {Name: "total_steps", Value: "1000"},
			{Name: "checkpoint_step", Value: "300"}, {Name: "checkpoint_path", Value: "/ckpt/step-300"}, {Name: "phase", Value: "warmup"}},
		LastUpdatedTime: metav1.NewTime(p0.Add(2 * time.Minute)),
	}
	return tj
}

func TestProgress(t *testing.T) {
	p := Progress(reporting())
	if p.GetPercent() != 40 || p.GetEtaSeconds() != 90 || p.GetStep() != 400 || p.GetTotalSteps() != 1000 {
		t.Errorf("progress %v", p)
	}
	if c := p.GetCheckpoint(); c.GetStep() != 300 || c.GetPath() != "/ckpt/step-300" {
		t.Errorf("checkpoint %v", c)
	}
	if p.GetProgressDeadlineSeconds() != 600 || !p.GetStallTime().AsTime().Equal(p0.Add(12*time.Minute)) {
		t.Errorf("deadline %d, stall at %v; want 600 and 10 minutes after the last report", p.GetProgressDeadlineSeconds(), p.GetStallTime().AsTime())
	}
	if Progress(kilntesting.MakeTrainJob("quiet", "ns").Obj()) != nil {
		t.Error("a job that never reported has progress")
	}
}

// The history's points, then the latest report as the newest point; text and bookkeeping
// metrics are no curves.
func TestMetricHistory(t *testing.T) {
	tj := reporting()
	h := &kiln.TrainJobMetrics{
		ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{UID: types.UID("u1"), Controller: ptr.To(true)}}},
		Series:     []kiln.MetricSeries{{Name: "loss", Count: 2, Stride: 1, Times: []int64{p0.Unix(), p0.Unix() + 60}, Steps: []int64{-1, 200}, Values: []string{"1", "0.5"}}},
		Status:     kiln.TrainJobMetricsStatus{Reports: 2},
	}
	got := MetricHistory(h, tj, nil)
	if len(got.GetSeries()) != 1 || got.GetSeries()[0].GetName() != "loss" {
		t.Fatalf("series %v, want loss only", got.GetSeries())
	}
	pts := got.GetSeries()[0].GetPoints()
	if len(pts) != 3 || pts[0].Step != nil || pts[1].GetStep() != 200 || pts[2].GetStep() != 400 || pts[2].GetValue() != 0.25 {
		t.Errorf("points %v", pts)
	}
	if !got.GetUpdateTime().AsTime().Equal(p0.Add(2 * time.Minute)) {
		t.Errorf("update time %v", got.GetUpdateTime().AsTime())
	}
	if only := MetricHistory(h, tj, []string{"lr"}); len(only.GetSeries()) != 0 {
		t.Errorf("asked for lr, got %v", only.GetSeries())
	}
}
