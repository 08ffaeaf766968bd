package service

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
)

// missingRuntime says, with the request's field (path), that a job of namespace names a
// runtime that does not exist. Kiln's webhook says so too, but in a namespace Kueue manages
// Kueue's webhook refuses the same job at the same time ("runtime 'x' not found", no
// field), and which of the two answers the apiserver returns is a race. The server's cache
// answers first; a miss is confirmed as the caller (a runtime created a moment ago), and
// anything but NotFound leaves the decision to the webhooks.
func missingRuntime(ctx context.Context, k *kube.Clients, namespace string, ref trainer.RuntimeRef, path *field.Path) field.ErrorList {
	if ref.Name == "" || ptr.Deref(ref.APIGroup, trainer.GroupVersion.Group) != trainer.GroupVersion.Group {
		return nil
	}
	var obj client.Object
	key := client.ObjectKey{Name: ref.Name}
	kind := ptr.Deref(ref.Kind, trainer.ClusterTrainingRuntimeKind)
	switch kind {
	case trainer.ClusterTrainingRuntimeKind:
		obj = &trainer.ClusterTrainingRuntime{}
	case trainer.TrainingRuntimeKind:
		obj, key.Namespace = &trainer.TrainingRuntime{}, namespace
	default:
		return nil
	}
	if err := k.Cache.Get(ctx, key, obj); err == nil || !apierrors.IsNotFound(err) {
		return nil
	}
	if err := k.AsCaller.Get(ctx, key, obj); err == nil || !apierrors.IsNotFound(err) {
		return nil
	}
	where := "the cluster"
	if key.Namespace != "" {
		where = "namespace " + key.Namespace
	}
	return field.ErrorList{field.Invalid(path, ref.Name, fmt.Sprintf(
		"%s %q not found in %s: name an existing runtime (`kiln runtimes list`), or create it first", kind, ref.Name, where))}
}

// runtimePath is where a create request names its job's runtime.
func runtimePath(m *kilnv1.CreateTrainJobRequest) *field.Path {
	if _, ok := m.GetSource().(*kilnv1.CreateTrainJobRequest_Manifest); ok {
		return field.NewPath("manifest", "spec", "runtimeRef", "name")
	}
	return field.NewPath("train_job", "spec", "runtime")
}
