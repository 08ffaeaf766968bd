package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrainJobKind is the kind of TrainJob.
const TrainJobKind = "TrainJob"

// TrainJob is a training job: a runtime reference plus the user's overrides.
//
// The State column prints the condition that is True (upstream prints the last condition,
// which shows "Suspended" for a job that was resumed).
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[?(@.status=="True")].type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')", message="metadata.name must match RFC 1035 DNS label format"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63", message="metadata.name must be no more than 63 characters"
type TrainJob struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the user asks for.
	// +optional
	Spec TrainJobSpec `json:"spec,omitzero"`

	// Status is what the operator observed.
	// +optional
	Status TrainJobStatus `json:"status,omitzero"`
}

// TrainJobList is a list of TrainJobs.
//
// +kubebuilder:object:root=true
type TrainJobList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainJob `json:"items"`
}

// TrainJobSpec is the desired state of a TrainJob.
type TrainJobSpec struct {
	// RuntimeRef names the TrainingRuntime or ClusterTrainingRuntime to start from.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +required
	RuntimeRef RuntimeRef `json:"runtimeRef,omitzero"`

	// Initializer configures the dataset and model initializers.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +optional
	Initializer *Initializer `json:"initializer,omitempty"`

	// Trainer overrides the runtime's trainer.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +optional
	Trainer *Trainer `json:"trainer,omitempty"`

	// RuntimePatches are patches to the runtime's template, one per manager, applied in order.
	// +listType=map
	// +listMapKey=manager
	// +kubebuilder:validation:MaxItems=16
	// +optional
	RuntimePatches []RuntimePatch `json:"runtimePatches,omitempty"`

	// Suspend suspends the TrainJob: its pods are removed and its deadline stops counting.
	// +kubebuilder:default=false
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// ActiveDeadlineSeconds bounds how long the TrainJob may be active (not suspended),
	// counted from its last start or resume. When it passes, the TrainJob fails with reason
	// DeadlineExceeded. Unset: the runtime's runPolicy, else no deadline.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="field is immutable"
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished deletes the TrainJob, and everything it owns, this long after
	// it finished. 0 deletes it as soon as it finishes. Unset: the runtime's runPolicy, else
	// it is kept.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// ManagedBy names the controller that reconciles this TrainJob.
	// +kubebuilder:default="trainer.kubeflow.org/trainjob-controller"
	// +kubebuilder:validation:XValidation:rule="self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']", message="ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
}

// RuntimeRef references a TrainingRuntime or ClusterTrainingRuntime.
type RuntimeRef struct {
	// Name of the runtime.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`

	// APIGroup of the runtime.
	// +kubebuilder:default="trainer.kubeflow.org"
	// +kubebuilder:validation:MaxLength=253
	// +optional
	APIGroup *string `json:"apiGroup,omitempty"`

	// Kind of the runtime: TrainingRuntime or ClusterTrainingRuntime.
	// +kubebuilder:default="ClusterTrainingRuntime"
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Kind *string `json:"kind,omitempty"`
}

// Initializer configures the dataset and model initializers.
type Initializer struct {
	// +optional
	Dataset *DatasetInitializer `json:"dataset,omitempty"`
	// +optional
	Model *ModelInitializer `json:"model,omitempty"`
}

// DatasetInitializer configures the dataset initializer.
type DatasetInitializer struct {
	// StorageUri is the dataset's location, such as hf://tatsu-lab/alpaca.
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",message="storageUri may be empty, or it must be a valid URI (scheme://...)"
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	StorageUri *string `json:"storageUri,omitempty"` //nolint:revive // wire name

	// Env is added to the initializer container.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// SecretRef names a Secret whose keys become the initializer's environment.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// ModelInitializer configures the model initializer.
type ModelInitializer struct {
	// StorageUri is the model's location, such as hf://meta-llama/Llama-3.2-1B-Instruct.
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",message="storageUri may be empty, or it must be a valid URI (scheme://...)"
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	StorageUri *string `json:"storageUri,omitempty"` //nolint:revive // wire name

	// Env is added to the initializer container.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// SecretRef names a Secret whose keys become the initializer's environment.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// Trainer overrides the runtime's trainer container and size.
type Trainer struct {
	// Image of the trainer container.
	// +kubebuilder:validation:MaxLength=500
	// +optional
	Image *string `json:"image,omitempty"`

	// Command of the trainer container.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=1048576
	// +optional
	Command []string `json:"command,omitempty"`

	// Args of the trainer container.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=1048576
	// +optional
	Args []string `json:"args,omitempty"`

	// Env of the trainer container.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// NumNodes is the number of training nodes (pods).
	// +optional
	NumNodes *int32 `json:"numNodes,omitempty"`

	// ResourcesPerNode are the compute resources of each training node.
	// +optional
	ResourcesPerNode *corev1.ResourceRequirements `json:"resourcesPerNode,omitempty"`

	// NumProcPerNode is the number of processes per node.
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
}

// RuntimePatch is one manager's patch to the runtime template.
type RuntimePatch struct {
	// Manager identifies who owns the patch, such as kueue.x-k8s.io/manager.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +required
	Manager string `json:"manager,omitempty"`

	// Time is when the patch last changed; set by the defaulting webhook.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`

	// TrainingRuntimeSpec patches the runtime spec.
	// +optional
	TrainingRuntimeSpec *TrainingRuntimeSpecPatch `json:"trainingRuntimeSpec,omitempty"`
}

// TrainingRuntimeSpecPatch patches a TrainingRuntimeSpec.
type TrainingRuntimeSpecPatch struct {
	// +optional
	Template *JobSetTemplatePatch `json:"template,omitempty"`
}

// JobSetTemplatePatch patches the JobSet template.
type JobSetTemplatePatch struct {
	// Metadata adds labels and annotations to the JobSet.
	// +optional
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *JobSetSpecPatch `json:"spec,omitempty"`
}

// JobSetSpecPatch patches the JobSet spec.
type JobSetSpecPatch struct {
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	ReplicatedJobs []ReplicatedJobPatch `json:"replicatedJobs,omitempty"`
}

// ReplicatedJobPatch patches one replicated job, by name.
type ReplicatedJobPatch struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
	// +optional
	Template *JobTemplatePatch `json:"template,omitempty"`
}

// JobTemplatePatch patches a Job template.
type JobTemplatePatch struct {
	// +optional
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *JobSpecPatch `json:"spec,omitempty"`
}

// JobSpecPatch patches a Job spec.
type JobSpecPatch struct {
	// +optional
	Template *PodTemplatePatch `json:"template,omitempty"`
}

// PodTemplatePatch patches a pod template.
type PodTemplatePatch struct {
	// +optional
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *PodSpecPatch `json:"spec,omitempty"`
}

// PodSpecPatch patches a pod spec.
type PodSpecPatch struct {
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +optional
	ServiceAccountName *string `json:"serviceAccountName,omitempty"`

	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +optional
	InitContainers []ContainerPatch `json:"initContainers,omitempty"`

	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +optional
	Containers []ContainerPatch `json:"containers,omitempty"`

	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	SchedulingGates []corev1.PodSchedulingGate `json:"schedulingGates,omitempty"`

	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="field is immutable"
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// ContainerPatch patches a container, by name.
type ContainerPatch struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`

	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// TrainJobStatus is the observed state of a TrainJob.
//
// +kubebuilder:validation:MinProperties=1
type TrainJobStatus struct {
	// Conditions: Suspended, Complete, Failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// JobsStatus is the status of each replicated job.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	JobsStatus []JobStatus `json:"jobsStatus,omitempty"`

	// TrainerStatus is the progress the training code reports.
	// +optional
	TrainerStatus *TrainerStatus `json:"trainerStatus,omitempty"`

	// StartTime is when the TrainJob last became active (not suspended); for a job queued
	// by Kueue, its admission time. Cleared while suspended.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when Complete or Failed turned True.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Restarts counts the restarts of all the job's pods together by its runtime's
	// failure policy (the JobSet's failurePolicy), and says why the last one happened.
	// Set once the job runs with a failure policy. A Kiln addition.
	// +optional
	Restarts *RestartsStatus `json:"restarts,omitempty"`
}

// RestartsStatus counts the restarts of a TrainJob's pods as a group.
type RestartsStatus struct {
	// Count is how many times all the job's pods were restarted together.
	// +kubebuilder:validation:Minimum=0
	// +required
	Count int32 `json:"count"`
	// CountedTowardsMax are those of Count that counted against MaxRestarts: a disruption
	// (matched by a RestartJobSetAndIgnoreMaxRestarts rule of the runtime) does not.
	// +kubebuilder:validation:Minimum=0
	// +required
	CountedTowardsMax int32 `json:"countedTowardsMax"`
	// MaxRestarts is the runtime's failurePolicy.maxRestarts: the counted restarts allowed
	// before a failure fails the job.
	// +kubebuilder:validation:Minimum=0
	// +required
	MaxRestarts int32 `json:"maxRestarts"`
	// LastReason is why the last restart happened: the name of the runtime's failure
	// policy rule that matched the failure (e.g. Disruption), or Failure when none did.
	// +kubebuilder:validation:MaxLength=316
	// +optional
	LastReason string `json:"lastReason,omitempty"`
	// LastMessage says what the last restart did and which job failed first.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	LastMessage string `json:"lastMessage,omitempty"`
	// LastRestartTime is when the last restart began.
	// +optional
	LastRestartTime *metav1.Time `json:"lastRestartTime,omitempty"`
	// ProgressStalls are those of Count that Kiln made because the job reported no progress
	// for its kiln.dev/progress-deadline (reason ProgressStalled).
	// +kubebuilder:validation:Minimum=0
	// +optional
	ProgressStalls int32 `json:"progressStalls,omitempty"`
}

// JobStatus counts the pods' Jobs of one replicated job.
type JobStatus struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +required
	Ready *int32 `json:"ready,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +required
	Succeeded *int32 `json:"succeeded,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +required
	Failed *int32 `json:"failed,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +required
	Active *int32 `json:"active,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +required
	Suspended *int32 `json:"suspended,omitempty"`
}

// TrainerStatus is the progress the training code reports.
//
// +kubebuilder:validation:XValidation:rule="has(self.lastUpdatedTime)",message="lastUpdatedTime is required when trainerStatus is present"
type TrainerStatus struct {
	// ProgressPercentage estimates how complete the job is, 0 to 100; unset if unknown.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ProgressPercentage *int32 `json:"progressPercentage,omitempty"`
	// EstimatedRemainingSeconds estimates the training time left; unset if unknown.
	// +kubebuilder:validation:Minimum=0
	// +optional
	EstimatedRemainingSeconds *int32 `json:"estimatedRemainingSeconds,omitempty"`
	// Metrics are the model's current metrics (e.g. loss), as strings.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Metrics []Metric `json:"metrics,omitempty"`
	// LastUpdatedTime is when the trainer observed this status.
	// +optional
	LastUpdatedTime metav1.Time `json:"lastUpdatedTime,omitempty"`
}

// Metric is one reported training metric.
type Metric struct {
	// Name is a user-defined label for the metric, e.g. "loss", "eval_accuracy".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Name string `json:"name,omitempty"`
	// Value of the metric, as a string.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Value string `json:"value,omitempty"`
}

// Limits of a TrainerStatus, as its CRD validates them.
const (
	MaxTrainerMetrics    = 256
	MaxMetricFieldLength = 64
)

// UpdateTrainJobStatusRequest is the body a trainer POSTs to the status server, at
// /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status
// (upstream's protocol, KEP-2779).
// +kubebuilder:object:generate=false
type UpdateTrainJobStatusRequest struct {
	// TrainerStatus is the trainer's latest status; a request without one changes nothing.
	// +optional
	TrainerStatus *TrainerStatus `json:"trainerStatus,omitempty"`
}
