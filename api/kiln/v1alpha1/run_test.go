package v1alpha1

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestRunName(t *testing.T) {
	when := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC) // Sunday 02:00 in Berlin
	name := RunName("weekly-retrain", when)
	if name != "weekly-retrain-29931900" || len(name)-len("weekly-retrain") != RunNameSuffixLength {
		t.Errorf("RunName = %q", name)
	}
	back, ok := ScheduledTimeOf("weekly-retrain", name)
	if !ok || !back.Equal(when) {
		t.Errorf("ScheduledTimeOf(%q) = %s, %t", name, back, ok)
	}
	for _, other := range []string{"weekly-retrain", "weekly-retrain-x", "nightly-29931900", "weekly-retrain--5"} {
		if _, ok := ScheduledTimeOf("weekly-retrain", other); ok {
			t.Errorf("ScheduledTimeOf(%q) is a run", other)
		}
	}
}

func TestNewRun(t *testing.T) {
	cj := &CronTrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "weekly", Namespace: "ml", UID: "u1"},
		Spec: CronTrainJobSpec{TrainJobTemplate: TrainJobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kueue.x-k8s.io/queue-name": "gpu"}},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}, Trainer: &trainer.Trainer{
				Env: []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}, {Name: EnvScheduledTime, Value: "a user's"}},
			}},
		}},
	}
	due := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	tj := cj.NewRun(due)
	if tj.Name != "weekly-29931900" || tj.Namespace != "ml" || tj.Labels[LabelCronTrainJob] != "weekly" || tj.Labels["kueue.x-k8s.io/queue-name"] != "gpu" ||
		tj.Annotations[AnnotationScheduledTime] != "2026-11-29T01:00:00Z" || !metav1.IsControlledBy(tj, cj) {
		t.Errorf("run: %+v", tj.ObjectMeta)
	}
	want := []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}, {Name: EnvScheduledTime, Value: "2026-11-29T01:00:00Z"}}
	if got := tj.Spec.Trainer.Env; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("env %v, want %v", got, want)
	}
	if len(cj.Spec.TrainJobTemplate.Spec.Trainer.Env) != 2 || cj.Spec.TrainJobTemplate.Spec.Trainer.Env[1].Value != "a user's" {
		t.Error("NewRun changed the template")
	}
}
