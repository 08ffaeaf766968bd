package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// LabelJobCompletionIndex is the Job controller's index of a pod in an indexed Job.
const LabelJobCompletionIndex = "batch.kubernetes.io/job-completion-index"

// MainContainer is the container a step's logs come from: the one named after its
// replicated job (node, launcher, dataset-initializer, ...), else the first. The API server
// streams it; the operator keeps its tail when the pod is deleted.
func MainContainer(pod *corev1.Pod) string {
	rj := pod.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
	for _, c := range pod.Spec.Containers {
		if c.Name == rj {
			return c.Name
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Name
	}
	return ""
}
