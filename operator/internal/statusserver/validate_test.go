package statusserver

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestValidateNamesTheField(t *testing.T) {
	many := &trainer.TrainerStatus{}
	for i := range 257 {
		many.Metrics = append(many.Metrics, trainer.Metric{Name: fmt.Sprint("m", i), Value: "1"})
	}
	for name, tc := range map[string]struct {
		ts   *trainer.TrainerStatus
		want string
	}{
		"257 metrics":   {many, "trainerStatus.metrics: Too many: 257: must have at most 256 items"},
		"percent 101":   {&trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](101)}, "trainerStatus.progressPercentage: Invalid value: 101: must be between 0 and 100"},
		"negative eta":  {&trainer.TrainerStatus{EstimatedRemainingSeconds: ptr.To[int32](-1)}, "trainerStatus.estimatedRemainingSeconds"},
		"long value":    {&trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "loss", Value: strings.Repeat("9", 65)}}}, "trainerStatus.metrics[0].value: Too long: may not be more than 64 bytes"},
		"empty name":    {&trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "", Value: "1"}}}, "trainerStatus.metrics[0].name: Required value"},
		"64 characters": {&trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: strings.Repeat("é", 64), Value: "1"}}}, ""},
	} {
		errs := validate(tc.ts)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: refused: %v", name, errs)
		case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
			t.Errorf("%s: %v, want %q", name, errs, tc.want)
		}
	}
}

func TestDecodeWarnsAboutUnknownFields(t *testing.T) {
	req, unknown, err := decode([]byte(`{"trainerStatus": {"progresPercentage": 5, "progressPercentage": 6, "metrics": [{"name": "loss", "value": "1", "unit": "nats"}]}, "extra": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(unknown); got != "[extra trainerStatus.metrics[0].unit trainerStatus.progresPercentage]" {
		t.Errorf("unknown %s", got)
	}
	if *req.TrainerStatus.ProgressPercentage != 6 {
		t.Errorf("progress %d", *req.TrainerStatus.ProgressPercentage)
	}
	if _, _, err := decode([]byte(`{"trainerStatus": {"progressPercentage": "half"}}`)); err == nil || !strings.Contains(err.Error(), "trainerStatus.progressPercentage") {
		t.Errorf("a string percentage: %v", err)
	}
	// Names match exactly: a field in other letters is unknown, warned about, and not applied.
	req, unknown, err = decode([]byte(`{"TRAINERSTATUS": {"progressPercentage": 7}, "trainerStatus": {"ProgressPercentage": 8}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(unknown); got != "[TRAINERSTATUS trainerStatus.ProgressPercentage]" {
		t.Errorf("unknown %s", got)
	}
	if req.TrainerStatus == nil || req.TrainerStatus.ProgressPercentage != nil {
		t.Errorf("a field in other letters was applied: %+v", req.TrainerStatus)
	}
}
