package v1alpha1

import (
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// RunName is the name of the run scheduled at t: the CronTrainJob's name and the scheduled
// time in minutes since the Unix epoch, as CronJob names its Jobs. It depends on nothing
// else, so a controller that restarts or retries finds the run it created.
func RunName(cronTrainJob string, t time.Time) string {
	return cronTrainJob + "-" + strconv.FormatInt(t.Unix()/60, 10)
}

// RunNameSuffixLength is how much longer a run's name is than its CronTrainJob's (a dash
// and 8 digits, until the year 2160).
const RunNameSuffixLength = 9

// ScheduledTimeOf recovers the scheduled time from a run's name, or reports false.
func ScheduledTimeOf(cronTrainJob, run string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(run, cronTrainJob+"-")
	if !ok {
		return time.Time{}, false
	}
	minutes, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || minutes < 0 {
		return time.Time{}, false
	}
	return time.Unix(minutes*60, 0).UTC(), true
}

// NewRun is the TrainJob of the run scheduled at due: the template's labels, annotations
// and spec, controlled by the CronTrainJob, and told its scheduled time (KILN_SCHEDULED_TIME).
func (cj *CronTrainJob) NewRun(due time.Time) *trainer.TrainJob {
	tmpl := cj.Spec.TrainJobTemplate
	tj := &trainer.TrainJob{
		TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: RunName(cj.Name, due), Namespace: cj.Namespace,
			Labels: map[string]string{}, Annotations: map[string]string{},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	for k, v := range tmpl.Labels {
		tj.Labels[k] = v
	}
	for k, v := range tmpl.Annotations {
		tj.Annotations[k] = v
	}
	tj.Labels[LabelCronTrainJob] = cj.Name
	stamp := due.UTC().Format(time.RFC3339)
	tj.Annotations[AnnotationScheduledTime] = stamp
	if tj.Spec.Trainer == nil {
		tj.Spec.Trainer = &trainer.Trainer{}
	}
	tj.Spec.Trainer.Env = slices.DeleteFunc(tj.Spec.Trainer.Env, func(e corev1.EnvVar) bool { return e.Name == EnvScheduledTime })
	tj.Spec.Trainer.Env = append(tj.Spec.Trainer.Env, corev1.EnvVar{Name: EnvScheduledTime, Value: stamp})
	tj.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cj, GroupVersion.WithKind(CronTrainJobKind))}
	return tj
}
