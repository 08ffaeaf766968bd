package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Finished reports whether a TrainJob with this status completed or failed for good. A
// missing runtime fails a TrainJob only until the runtime appears, so that failure is not
// final.
func Finished(st *TrainJobStatus) bool {
	if meta.IsStatusConditionTrue(st.Conditions, TrainJobComplete) {
		return true
	}
	c := meta.FindStatusCondition(st.Conditions, TrainJobFailed)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason != TrainJobRuntimeNotFoundReason
}
