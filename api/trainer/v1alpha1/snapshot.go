package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The runtime a TrainJob renders from is pinned, so that editing the runtime never changes a
// job that exists: a ConfigMap holds the RuntimeSnapshot as YAML under RuntimeSnapshotKey.
//
//   - Shared (most jobs): the defaulting webhook stamps a new TrainJob with the hash of its
//     runtime as it is at admission (AnnotationRuntimeSnapshot), and every job of the same
//     namespace stamped with that hash renders from one ConfigMap, SharedRuntimeSnapshotName,
//     labelled LabelRuntimeSnapshot=SharedSnapshot and owned by nobody: the operator deletes it
//     once no TrainJob of its namespace names its hash. Its content's hash is its name's.
//   - Per job: a job not stamped (created before Kiln stamped them), or whose runtime changed
//     between its admission and its first reconcile, is pinned at its first reconcile in a
//     ConfigMap of its own, RuntimeSnapshotName, labelled LabelRuntimeSnapshot=true and owned
//     by the TrainJob (the garbage collector deletes it with the job).
//
// The operator renders from it; the API server reads the job's runPolicy from it.
const (
	LabelRuntimeSnapshot = "kiln.dev/runtime-snapshot"
	// AnnotationRuntimeSnapshot on a TrainJob is the hash of the runtime it was admitted
	// against. The defaulting webhook sets it on create and keeps it on every update.
	AnnotationRuntimeSnapshot = "kiln.dev/runtime-snapshot"
	RuntimeSnapshotKey        = "runtime"
	// OwnSnapshot and SharedSnapshot are the values of LabelRuntimeSnapshot.
	OwnSnapshot    = "true"
	SharedSnapshot = "shared"
)

// RuntimeSnapshotName is the name of the snapshot ConfigMap of the TrainJob named job.
func RuntimeSnapshotName(job string) string { return job + "-runtime-snapshot" }

// SharedRuntimeSnapshotName is the name of the shared snapshot ConfigMap of that hash.
func SharedRuntimeSnapshotName(hash string) string { return "kiln-runtime-" + hash }

// RuntimeSnapshot is a runtime as it was when a TrainJob was pinned to it.
// +kubebuilder:object:generate=false
type RuntimeSnapshot struct {
	Kind string              `json:"kind"`
	Name string              `json:"name"`
	Spec TrainingRuntimeSpec `json:"spec"`
}

// EncodeRuntimeSnapshot is the snapshot's ConfigMap data and its hash (the same snapshot
// always encodes to the same data).
func EncodeRuntimeSnapshot(snap *RuntimeSnapshot) (data, hash string, err error) {
	b, err := yaml.Marshal(snap)
	if err != nil {
		return "", "", fmt.Errorf("encoding runtime snapshot: %w", err)
	}
	return string(b), RuntimeSnapshotHash(string(b)), nil
}

// RuntimeSnapshotHash is the hash of a snapshot's data: 16 hex digits of its SHA-256.
func RuntimeSnapshotHash(data string) string {
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:8])
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

// IsSharedRuntimeSnapshot says whether cm is the shared snapshot of that hash: its name, its
// label and its content's hash all say so. Anything else under that name is someone else's.
func IsSharedRuntimeSnapshot(cm *corev1.ConfigMap, hash string) bool {
	data, ok := cm.Data[RuntimeSnapshotKey]
	return ok && cm.Name == SharedRuntimeSnapshotName(hash) && cm.Labels[LabelRuntimeSnapshot] == SharedSnapshot &&
		RuntimeSnapshotHash(data) == hash
}
