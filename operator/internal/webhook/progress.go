package webhook

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// inheritProgressDeadline gives a new TrainJob its runtime's kiln.dev/progress-deadline
// unless it sets its own: pinned at creation like the rest of the runtime, and visible on
// the job. A runtime that cannot be read is the validator's to report.
func inheritProgressDeadline(rt client.Object, tj *trainer.TrainJob) {
	if rt == nil {
		return
	}
	if _, ok := tj.Annotations[kiln.AnnotationProgressDeadline]; ok {
		return
	}
	if v, ok := rt.GetAnnotations()[kiln.AnnotationProgressDeadline]; ok {
		if tj.Annotations == nil {
			tj.Annotations = map[string]string{}
		}
		tj.Annotations[kiln.AnnotationProgressDeadline] = v
	}
}

// validateProgressDeadline checks the annotation is a positive duration.
func validateProgressDeadline(tj *trainer.TrainJob) field.ErrorList {
	v, ok := tj.Annotations[kiln.AnnotationProgressDeadline]
	if !ok {
		return nil
	}
	if _, err := kiln.ParseProgressDeadline(v); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key(kiln.AnnotationProgressDeadline), v,
			"must be a positive duration, e.g. 15m or 1h30m: how long the running job may go without reporting progress (a bare number has no unit)")}
	}
	return nil
}
