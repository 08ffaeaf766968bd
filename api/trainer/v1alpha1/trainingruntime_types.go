package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// Kinds of the runtimes.
const (
	TrainingRuntimeKind        = "TrainingRuntime"
	ClusterTrainingRuntimeKind = "ClusterTrainingRuntime"
)

// ClusterTrainingRuntime is a training runtime every namespace can use.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster
type ClusterTrainingRuntime struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec TrainingRuntimeSpec `json:"spec,omitzero"`
}

// ClusterTrainingRuntimeList is a list of ClusterTrainingRuntimes.
//
// +kubebuilder:object:root=true
type ClusterTrainingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterTrainingRuntime `json:"items"`
}

// TrainingRuntime is a training runtime of one namespace.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
type TrainingRuntime struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec TrainingRuntimeSpec `json:"spec,omitempty,omitzero"`
}

// TrainingRuntimeList is a list of TrainingRuntimes.
//
// +kubebuilder:object:root=true
type TrainingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainingRuntime `json:"items"`
}

// TrainingRuntimeSpec is a runtime: an ML policy, a pod group policy, a JobSet template and
// the admin's run policy defaults.
//
// Cleanup and deadlines belong to the TrainJob (runPolicy), never to the JobSet or its Jobs:
// a JobSet or Job that deleted or failed itself would bypass the TrainJob's lifecycle.
//
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(self.template) || !has(self.template.spec) || !has(self.template.spec.ttlSecondsAfterFinished)", message="template.spec.ttlSecondsAfterFinished must not be set: set spec.runPolicy.ttlSecondsAfterFinished instead, so the TrainJob owns its cleanup"
// +kubebuilder:validation:XValidation:rule="!has(self.template) || !has(self.template.spec) || !has(self.template.spec.replicatedJobs) || self.template.spec.replicatedJobs.all(rj, !has(rj.template) || !has(rj.template.spec) || !has(rj.template.spec.ttlSecondsAfterFinished))", message="template.spec.replicatedJobs[].template.spec.ttlSecondsAfterFinished must not be set: set spec.runPolicy.ttlSecondsAfterFinished instead, so the TrainJob owns its cleanup"
// +kubebuilder:validation:XValidation:rule="!has(self.template) || !has(self.template.spec) || !has(self.template.spec.replicatedJobs) || self.template.spec.replicatedJobs.all(rj, !has(rj.template) || !has(rj.template.spec) || !has(rj.template.spec.activeDeadlineSeconds))", message="template.spec.replicatedJobs[].template.spec.activeDeadlineSeconds must not be set: set spec.runPolicy.activeDeadlineSeconds instead, so the deadline pauses while the TrainJob is suspended"
type TrainingRuntimeSpec struct {
	// MLPolicy is the framework policy (torch, mpi, jax, xgboost, flux) and node count.
	// +optional
	MLPolicy *MLPolicy `json:"mlPolicy,omitempty"`

	// PodGroupPolicy configures gang scheduling.
	// +optional
	PodGroupPolicy *PodGroupPolicy `json:"podGroupPolicy,omitempty"`

	// Template is the JobSet every TrainJob of this runtime is rendered from.
	// +optional
	Template JobSetTemplateSpec `json:"template,omitzero"`

	// RunPolicy holds the defaults for the TrainJobs of this runtime; a TrainJob's own
	// value wins. A TrainJob keeps the values of the runtime as it was when first reconciled.
	// +optional
	RunPolicy *RunPolicy `json:"runPolicy,omitempty"`
}

// RunPolicy is an admin's lifecycle defaults for the TrainJobs of a runtime.
type RunPolicy struct {
	// ActiveDeadlineSeconds is the default TrainJob spec.activeDeadlineSeconds.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished is the default TrainJob spec.ttlSecondsAfterFinished.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// JobSetTemplateSpec is the JobSet template of a runtime.
//
// +kubebuilder:validation:MinProperties=1
type JobSetTemplateSpec struct {
	// Metadata holds the JobSet's labels and annotations; its name and namespace are the
	// TrainJob's.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the JobSet spec.
	// +optional
	Spec jobsetv1alpha2.JobSetSpec `json:"spec,omitempty"`
}

// PodGroupPolicy configures gang scheduling.
type PodGroupPolicy struct {
	PodGroupPolicySource `json:",inline"`
}

// PodGroupPolicySource is one gang-scheduling plugin.
type PodGroupPolicySource struct {
	// +optional
	Coscheduling *CoschedulingPodGroupPolicySource `json:"coscheduling,omitempty"`
	// +optional
	Volcano *VolcanoPodGroupPolicySource `json:"volcano,omitempty"`
}

// CoschedulingPodGroupPolicySource configures the scheduler-plugins coscheduling plugin.
type CoschedulingPodGroupPolicySource struct {
	// +kubebuilder:default=60
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// VolcanoPodGroupPolicySource configures Volcano gang scheduling.
type VolcanoPodGroupPolicySource struct {
	// NetworkTopology constrains placement across network tiers (Volcano's
	// NetworkTopologySpec, same wire format).
	// +optional
	NetworkTopology *NetworkTopologySpec `json:"networkTopology,omitempty"`
}

// NetworkTopologySpec is Volcano's network topology constraint.
type NetworkTopologySpec struct {
	// Mode of the constraint.
	// +kubebuilder:validation:Enum=hard;soft
	// +kubebuilder:default=hard
	// +optional
	Mode NetworkTopologyMode `json:"mode,omitempty"`

	// HighestTierAllowed is the highest tier a job may cross when scheduled.
	// +kubebuilder:default=1
	// +optional
	HighestTierAllowed *int `json:"highestTierAllowed,omitempty"`
}

// NetworkTopologyMode is hard or soft.
type NetworkTopologyMode string

// MLPolicy is the framework policy of a runtime.
//
// +kubebuilder:validation:XValidation:rule="[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)].filter(x, x).size() <= 1", message="Only one of the policy can be configured"
type MLPolicy struct {
	// NumNodes is the default number of training nodes.
	// +optional
	NumNodes *int32 `json:"numNodes,omitempty"`

	MLPolicySource `json:",inline"`
}

// MLPolicySource is one framework.
type MLPolicySource struct {
	// +optional
	Torch *TorchMLPolicySource `json:"torch,omitempty"`
	// +optional
	MPI *MPIMLPolicySource `json:"mpi,omitempty"`
	// +optional
	Flux *FluxMLPolicySource `json:"flux,omitempty"`
	// +optional
	JAX *JAXMLPolicySource `json:"jax,omitempty"`
	// +optional
	XGBoost *XGBoostMLPolicySource `json:"xgboost,omitempty"`
}

// TorchMLPolicySource configures torchrun.
type TorchMLPolicySource struct {
	// EnvInjection also injects the PET_* variables into other containers.
	// +optional
	EnvInjection *EnvInjection `json:"envInjection,omitempty"`
}

// EnvInjection lists the containers that also receive the PET_* variables.
type EnvInjection struct {
	// +listType=map
	// +listMapKey=jobName
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Targets []EnvInjectionTarget `json:"targets,omitempty"`
}

// EnvInjectionTarget names containers of one replicated job.
type EnvInjectionTarget struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	JobName string `json:"jobName,omitempty"`

	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!self.exists(c, c == 'node')", message="containerNames must not include the main node container because PET_* envs are always injected into it"
	// +required
	ContainerNames []string `json:"containerNames,omitempty"`
}

// JAXMLPolicySource configures JAX distributed.
type JAXMLPolicySource struct{}

// XGBoostMLPolicySource configures XGBoost's collective.
type XGBoostMLPolicySource struct{}

// MPIMLPolicySource configures MPI.
type MPIMLPolicySource struct {
	// +kubebuilder:default=1
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`

	// +kubebuilder:default=OpenMPI
	// +kubebuilder:validation:Enum=OpenMPI;""
	// +optional
	MPIImplementation *MPIImplementation `json:"mpiImplementation,omitempty"`

	// +kubebuilder:default=/root/.ssh
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	SSHAuthMountPath *string `json:"sshAuthMountPath,omitempty"`

	// +kubebuilder:default=false
	// +optional
	RunLauncherAsNode *bool `json:"runLauncherAsNode,omitempty"`
}

// FluxMLPolicySource configures Flux.
type FluxMLPolicySource struct {
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="NumProcPerNode in fluxPolicy must be >= 1"
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
}

// MPIImplementation is an MPI implementation.
type MPIImplementation string

// MPI implementations.
const (
	MPIImplementationOpenMPI MPIImplementation = "OpenMPI"
	MPIImplementationIntel   MPIImplementation = "Intel"
	MPIImplementationMPICH   MPIImplementation = "MPICH"
)
