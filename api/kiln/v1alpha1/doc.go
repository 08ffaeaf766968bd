// Package v1alpha1 holds Kiln's own kinds, group kiln.dev (the trainer.kubeflow.org group
// stays upstream's): CronTrainJob, which creates TrainJobs on a schedule, and TrainJobMetrics,
// the history of the metrics a TrainJob reported.
//
// +kubebuilder:object:generate=true
// +groupName=kiln.dev
package v1alpha1
