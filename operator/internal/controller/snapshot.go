package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/render"
)

// errRuntimeNotFound means the referenced runtime does not exist (yet).
var errRuntimeNotFound = errors.New("runtime not found")

func snapshotName(tj *trainer.TrainJob) string { return trainer.RuntimeSnapshotName(tj.Name) }

func runtimeKind(tj *trainer.TrainJob) string {
	return ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)
}

// pinnedRuntime returns the runtime spec the TrainJob renders from. On the first reconcile
// it reads the live runtime and stores it in a ConfigMap owned by the TrainJob, so editing
// the runtime later never changes this job (the same ConfigMap upstream Trainer keeps).
func (r *TrainJobReconciler) pinnedRuntime(ctx context.Context, tj *trainer.TrainJob) (*trainer.TrainingRuntimeSpec, error) {
	cm := &corev1.ConfigMap{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: snapshotName(tj)}, cm)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(cm, tj) {
			return nil, fmt.Errorf("runtime snapshot ConfigMap %s is not owned by this TrainJob: delete or rename it", cm.Name)
		}
		snap := &trainer.RuntimeSnapshot{}
		if err := yaml.UnmarshalStrict([]byte(cm.Data[trainer.RuntimeSnapshotKey]), snap); err != nil {
			return nil, fmt.Errorf("decoding runtime snapshot %s: %w", cm.Name, err)
		}
		return &snap.Spec, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading runtime snapshot: %w", err)
	}

	snap := &trainer.RuntimeSnapshot{Kind: runtimeKind(tj), Name: tj.Spec.RuntimeRef.Name}
	switch snap.Kind {
	case trainer.TrainingRuntimeKind:
		rt := &trainer.TrainingRuntime{}
		err = r.client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: snap.Name}, rt)
		snap.Spec = rt.Spec
	case trainer.ClusterTrainingRuntimeKind:
		rt := &trainer.ClusterTrainingRuntime{}
		err = r.client.Get(ctx, client.ObjectKey{Name: snap.Name}, rt)
		snap.Spec = rt.Spec
	default:
		return nil, fmt.Errorf("spec.runtimeRef.kind %q is not supported: use TrainingRuntime or ClusterTrainingRuntime", snap.Kind)
	}
	if apierrors.IsNotFound(err) {
		return nil, errRuntimeNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", snap.Kind, snap.Name, err)
	}
	data, err := yaml.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("encoding runtime snapshot: %w", err)
	}
	cm = &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            snapshotName(tj),
			Namespace:       tj.Namespace,
			Labels:          map[string]string{trainer.LabelRuntimeSnapshot: "true"},
			OwnerReferences: []metav1.OwnerReference{render.OwnerReference(tj)},
		},
		Data: map[string]string{trainer.RuntimeSnapshotKey: string(data)},
	}
	if err := r.client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("storing runtime snapshot: %w", err)
	} else if apierrors.IsAlreadyExists(err) {
		// Another reconcile pinned it first; use what it stored.
		return r.pinnedRuntime(ctx, tj)
	}
	return &snap.Spec, nil
}
