package platform

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Annotations of a simulated pod that the platform's KWOK pod stages (stages.yaml) read.
const (
	// AnnotationSimDuration is how long the pod runs before it succeeds (or fails).
	AnnotationSimDuration = "sim.kiln.dev/duration"
	// AnnotationSimExitCode makes the pod fail with this exit code after its duration.
	AnnotationSimExitCode = "sim.kiln.dev/exit-code"
	// AnnotationSimEvictAfter evicts the pod like a spot reclaim after this duration.
	AnnotationSimEvictAfter = "sim.kiln.dev/evict-after"
)

// SimulatedPods is a runtime patch, owned by manager, that annotates the pods of the
// runtime's replicated job `job`: how a TrainJob tells its simulated pods how to run.
func SimulatedPods(manager, job string, annotations map[string]string) trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: job, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
			Template: &trainer.PodTemplatePatch{Metadata: &metav1.ObjectMeta{Annotations: annotations}},
		}}}}},
	}}}
}
