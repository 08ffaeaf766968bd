package v1alpha1

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

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

// DecodeRuntimeSnapshot reads the snapshot that a snapshot ConfigMap holds under
// RuntimeSnapshotKey. Strictly: Kiln writes it with these very types, so an unknown or
// mistyped field means someone else wrote it, and the error names that field.
func DecodeRuntimeSnapshot(cm *corev1.ConfigMap) (*RuntimeSnapshot, error) {
	data, ok := cm.Data[RuntimeSnapshotKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s holds no runtime snapshot: data.%s is missing", cm.Namespace, cm.Name, RuntimeSnapshotKey)
	}
	snap := &RuntimeSnapshot{}
	if err := yaml.UnmarshalStrict([]byte(data), snap); err != nil {
		return nil, fmt.Errorf("decoding runtime snapshot %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return snap, nil
}
