package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// CronTrainJobKind is the kind of CronTrainJob.
const CronTrainJobKind = "CronTrainJob"

// Labels, annotations and the environment variable of the TrainJobs a CronTrainJob creates.
const (
	// LabelCronTrainJob names the CronTrainJob that created a TrainJob.
	LabelCronTrainJob = "kiln.dev/cron-train-job"
	// AnnotationScheduledTime is the time a run was scheduled for, RFC 3339.
	AnnotationScheduledTime = "kiln.dev/scheduled-time"
	// EnvScheduledTime tells the trainer the time its run was scheduled for (RFC 3339, UTC),
	// so that a retrain can pick its data window.
	EnvScheduledTime = "KILN_SCHEDULED_TIME"
)

// ConcurrencyPolicy says what happens when a run is due while an earlier one is active
// (queued in Kueue, or running).
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

const (
	// AllowConcurrent runs them side by side.
	AllowConcurrent ConcurrencyPolicy = "Allow"
	// ForbidConcurrent skips the new run while the earlier one is active.
	ForbidConcurrent ConcurrencyPolicy = "Forbid"
	// ReplaceConcurrent deletes the active run and starts the new one.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// CronTrainJob creates a TrainJob on a schedule, as a CronJob creates Jobs.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ctj
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Timezone",type=string,JSONPath=`.spec.timeZone`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.activeCount`
// +kubebuilder:printcolumn:name="Last Schedule",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CronTrainJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CronTrainJobSpec   `json:"spec,omitempty"`
	Status CronTrainJobStatus `json:"status,omitempty"`
}

// CronTrainJobSpec is when to run which TrainJob, with CronJob's fields and meaning.
type CronTrainJobSpec struct {
	// Schedule is a cron expression (minute hour day-of-month month day-of-week), e.g.
	// "0 2 * * 0" for Sundays at 02:00, or a macro: @yearly, @monthly, @weekly, @daily, @hourly.
	// +kubebuilder:validation:MinLength=1
	// +required
	Schedule string `json:"schedule"`

	// TimeZone is the IANA time zone the schedule is read in, e.g. Europe/Berlin; UTC when unset.
	// +optional
	TimeZone *string `json:"timeZone,omitempty"`

	// StartingDeadlineSeconds: a run that could not start within this many seconds of its
	// scheduled time (the operator was down, or Forbid held it back) is skipped.
	// +kubebuilder:validation:Minimum=0
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// ConcurrencyPolicy: Allow (default), Forbid (a queued run counts as active) or Replace.
	// +kubebuilder:default=Allow
	// +optional
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// Suspend stops new runs; runs already created continue.
	// +kubebuilder:default=false
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// TrainJobTemplate is the TrainJob each run creates.
	// +required
	TrainJobTemplate TrainJobTemplateSpec `json:"trainJobTemplate"`

	// SuccessfulJobsHistoryLimit is how many completed runs to keep (default 3).
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +optional
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`

	// FailedJobsHistoryLimit is how many failed runs to keep (default 1).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`
}

// TrainJobTemplateSpec is the TrainJob of each run: its labels and annotations, and its spec.
type TrainJobTemplateSpec struct {
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec trainer.TrainJobSpec `json:"spec"`
}

// CronTrainJobStatus is what the schedule did.
type CronTrainJobStatus struct {
	// Active are the runs that have not finished (queued in Kueue, suspended or running).
	// +listType=atomic
	// +optional
	Active []corev1.ObjectReference `json:"active,omitempty"`
	// ActiveCount is len(active), for kubectl get.
	// +optional
	ActiveCount int32 `json:"activeCount,omitempty"`
	// LastScheduleTime is the scheduled time of the last run created.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// LastSuccessfulTime is when the last successful run completed.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// Conditions: Ready (the schedule parses and runs are created as due).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true

// CronTrainJobList is a list of CronTrainJobs.
type CronTrainJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CronTrainJob `json:"items"`
}
