package v1alpha1

// The runtime a TrainJob was pinned to at its first reconcile lives in a ConfigMap owned by
// the TrainJob (as upstream Trainer keeps it): named RuntimeSnapshotName, labelled
// LabelRuntimeSnapshot=true, with the RuntimeSnapshot as YAML under RuntimeSnapshotKey.
// The operator renders from it; the API server reads the job's runPolicy from it.
const (
	LabelRuntimeSnapshot = "kiln.dev/runtime-snapshot"
	RuntimeSnapshotKey   = "runtime"
)

// RuntimeSnapshotName is the name of the snapshot ConfigMap of the TrainJob named job.
func RuntimeSnapshotName(job string) string { return job + "-runtime-snapshot" }

// RuntimeSnapshot is a runtime as it was when a TrainJob was pinned to it.
// +kubebuilder:object:generate=false
type RuntimeSnapshot struct {
	Kind string              `json:"kind"`
	Name string              `json:"name"`
	Spec TrainingRuntimeSpec `json:"spec"`
}
