package v1alpha1

// Condition types of a TrainJob.
const (
	TrainJobSuspended = "Suspended"
	TrainJobComplete  = "Complete"
	TrainJobFailed    = "Failed"
)

// Condition reasons and messages of a TrainJob.
const (
	TrainJobSuspendedReason           = "Suspended"
	TrainJobResumedReason             = "Resumed"
	TrainJobRuntimeNotSupportedReason = "TrainingRuntimeNotSupported"
	TrainJobDeadlineExceededReason    = "DeadlineExceeded"
	TrainJobSuspendedMessage          = "TrainJob is suspended"
	TrainJobResumedMessage            = "TrainJob is resumed"
	TrainJobDeadlineExceededMessage   = "TrainJob exceeded its active deadline"
	TrainJobRuntimeNotFoundReason     = "RuntimeNotFound"
	TrainJobRuntimeFoundReason        = "RuntimeFound"
	// TrainJobJobSetRejectedReason: the apiserver refused the JobSet for good (invalid, or
	// denied by an admission webhook); retrying cannot help.
	TrainJobJobSetRejectedReason = "JobSetRejected"
	// TrainJobProgressStalledReason: a job that reported progress went silent for its
	// kiln.dev/progress-deadline; its pods were restarted once (a restart reason).
	TrainJobProgressStalledReason = "ProgressStalled"
	// TrainJobProgressDeadlineExceededReason: silent again after that restart; failed.
	TrainJobProgressDeadlineExceededReason = "ProgressDeadlineExceeded"
)

// Well-known values.
const (
	// TrainJobControllerName is the default spec.managedBy: Kiln's (and upstream's) controller.
	TrainJobControllerName = "trainer.kubeflow.org/trainjob-controller"
	// MultiKueueControllerName is spec.managedBy for jobs MultiKueue dispatches elsewhere.
	MultiKueueControllerName = "kueue.x-k8s.io/multikueue"
	// KueueManager is the runtimePatches manager Kueue writes on admission.
	KueueManager = "kueue.x-k8s.io/manager"
)

// Labels on runtimes and on the replicated jobs of their templates.
const (
	// LabelFramework names a runtime's framework: torch, deepspeed, jax, xgboost, mpi, ...
	LabelFramework = "trainer.kubeflow.org/framework"
	// LabelTrainJobAncestor marks which replicated job is the trainer or an initializer.
	LabelTrainJobAncestor = "trainer.kubeflow.org/trainjob-ancestor-step"
	// LabelSupport marks deprecated runtimes (value "deprecated").
	LabelSupport = "trainer.kubeflow.org/support"
)

// Values of LabelTrainJobAncestor, which are also the replicated job and container names of
// the initializers.
const (
	AncestorTrainer            = "trainer"
	AncestorDatasetInitializer = "dataset-initializer"
	AncestorModelInitializer   = "model-initializer"
)

// Names of the trainer's replicated jobs and container.
const (
	NodeName     = "node"
	LauncherName = "launcher"
)
