package service

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/suggest"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
)

// Before a job or schedule is created, the server checks what only a lookup can tell and
// Kubernetes would accept anyway: the runtime it names exists, and so does its LocalQueue.
// Either missing is a job that waits forever; both are refused naming the request's field,
// the names that exist and the nearest one. (kubectl users get the queue as a warning from
// Kiln's webhook: Kueue lets a queue be created after its jobs.)

// maxNamesListed is how many existing names a refusal lists before "and N more".
const maxNamesListed = 8

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
	var list client.ObjectList
	key := client.ObjectKey{Name: ref.Name}
	kind := ptr.Deref(ref.Kind, trainer.ClusterTrainingRuntimeKind)
	switch kind {
	case trainer.ClusterTrainingRuntimeKind:
		obj, list = &trainer.ClusterTrainingRuntime{}, &trainer.ClusterTrainingRuntimeList{}
	case trainer.TrainingRuntimeKind:
		obj, list, key.Namespace = &trainer.TrainingRuntime{}, &trainer.TrainingRuntimeList{}, namespace
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
	var names []string
	if err := k.Cache.List(ctx, list, client.InNamespace(key.Namespace)); err == nil {
		switch l := list.(type) {
		case *trainer.ClusterTrainingRuntimeList:
			for _, rt := range l.Items {
				names = append(names, rt.Name)
			}
		case *trainer.TrainingRuntimeList:
			for _, rt := range l.Items {
				names = append(names, rt.Name)
			}
		}
	}
	return field.ErrorList{field.Invalid(path, ref.Name, fmt.Sprintf(
		"%s %q not found in %s%s: name an existing runtime (`kiln runtimes list`: %s), or create it first",
		kind, ref.Name, where, suggest.DidYouMean(ref.Name, names), suggest.List(names, maxNamesListed)))}
}

// missingQueue says, with the request's field (path), that a job of namespace names a
// LocalQueue that does not exist there. Where Kueue is not installed nothing reads the
// label, and nothing is said. A miss in the cache is confirmed with the server's own
// identity (the caller may not be allowed to read queues); the names of the namespace's
// queues are listed when the caller may list them.
func missingQueue(ctx context.Context, k *kube.Clients, namespace, queue string, path *field.Path) field.ErrorList {
	if queue == "" || !k.Kueue() {
		return nil
	}
	if err := k.Cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: queue}, kube.New(kube.LocalQueueGVK)); err == nil || !apierrors.IsNotFound(err) {
		return nil
	}
	gv := kube.LocalQueueGVK.GroupVersion()
	err := k.Self.CoreV1().RESTClient().Get().AbsPath("/apis", gv.Group, gv.Version, "namespaces", namespace, "localqueues", queue).Do(ctx).Error()
	if !apierrors.IsNotFound(err) {
		return nil
	}
	var names []string
	attrs := kube.Attributes{Verb: "list", Group: kueueGroup, Resource: "localqueues", Namespace: namespace}
	if ok, _, err := k.Authorizer.Allowed(ctx, attrs); err == nil && ok {
		lqs := kube.NewList(kube.LocalQueueGVK)
		if err := k.Cache.List(ctx, lqs, client.InNamespace(namespace)); err == nil {
			for _, lq := range lqs.Items {
				names = append(names, lq.GetName())
			}
		}
	}
	fix := "ask an admin to create it"
	if len(names) > 0 {
		fix = fmt.Sprintf("name one of the namespace's (`kiln queues list`: %s), or %s", suggest.List(names, maxNamesListed), fix)
	}
	return field.ErrorList{field.Invalid(path, queue, fmt.Sprintf(
		"LocalQueue %q does not exist in namespace %s%s, so the job would wait forever: %s",
		queue, namespace, suggest.DidYouMean(queue, names), fix))}
}

// runtimePath is where a create request names its job's runtime.
func runtimePath(m *kilnv1.CreateTrainJobRequest) *field.Path {
	if _, ok := m.GetSource().(*kilnv1.CreateTrainJobRequest_Manifest); ok {
		return field.NewPath("manifest", "spec", "runtimeRef", "name")
	}
	return field.NewPath("train_job", "spec", "runtime")
}

// queuePath is where a create request names its job's LocalQueue.
func queuePath(m *kilnv1.CreateTrainJobRequest) *field.Path {
	if _, ok := m.GetSource().(*kilnv1.CreateTrainJobRequest_Manifest); ok {
		return field.NewPath("manifest", "metadata", "labels").Key(trainer.KueueQueueNameLabel)
	}
	return field.NewPath("train_job", "spec", "queue")
}

// defaultQueueWarning says that Kueue put a job that names no queue in its namespace's
// default LocalQueue (its LocalQueueDefaulting), which the caller did not ask for.
func defaultQueueWarning(asked, got string) string {
	if asked != "" || got == "" {
		return ""
	}
	return fmt.Sprintf("queued in LocalQueue %q, the namespace's default (Kueue chose it: the job names no queue); name another with --queue (label %s)", got, trainer.KueueQueueNameLabel)
}
