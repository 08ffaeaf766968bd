// Package v1alpha1 holds the trainer.kubeflow.org/v1alpha1 API that Kiln serves: TrainJob,
// TrainingRuntime and ClusterTrainingRuntime, wire-compatible with Kubeflow Trainer v2.3,
// plus the KEP-2899 lifecycle fields (spec.ttlSecondsAfterFinished, runtime spec.runPolicy,
// status.startTime and status.completionTime).
//
// +kubebuilder:object:generate=true
// +groupName=trainer.kubeflow.org
package v1alpha1
