package render

import (
	"slices"

	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
)

// KeepAttemptLogs marks every pod of the JobSet for the operator's attempt-logs
// controller (package attemptlogs): a label it watches them by, and a finalizer that holds
// a deleted pod until the tail of its log is kept. The Job controller copies a pod
// template's finalizers to its pods.
func KeepAttemptLogs(js *jobsetv1alpha2.JobSet) {
	for i := range js.Spec.ReplicatedJobs {
		meta := &js.Spec.ReplicatedJobs[i].Template.Spec.Template.ObjectMeta
		if meta.Labels == nil {
			meta.Labels = map[string]string{}
		}
		meta.Labels[kiln.LabelKeepLogs] = "true"
		if !slices.Contains(meta.Finalizers, kiln.FinalizerAttemptLogs) {
			meta.Finalizers = append(meta.Finalizers, kiln.FinalizerAttemptLogs)
		}
	}
}
