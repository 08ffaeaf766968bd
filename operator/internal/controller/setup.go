package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// indexRuntimeRef indexes TrainJobs by "<kind>/<name>" of their runtime.
const indexRuntimeRef = "spec.runtimeRef"

func runtimeRefKey(kind, name string) string { return kind + "/" + name }

// SetupWithManager registers the controller: TrainJobs, the JobSets they own, and the
// runtimes they wait for.
func (r *TrainJobReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &trainer.TrainJob{}, indexRuntimeRef, func(o client.Object) []string {
		tj := o.(*trainer.TrainJob)
		return []string{runtimeRefKey(runtimeKind(tj), tj.Spec.RuntimeRef.Name)}
	}); err != nil {
		return fmt.Errorf("indexing TrainJobs by runtime: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("trainjob").
		For(&trainer.TrainJob{}).
		Owns(&jobsetv1alpha2.JobSet{}).
		Watches(&trainer.ClusterTrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.jobsOfRuntime(trainer.ClusterTrainingRuntimeKind))).
		Watches(&trainer.TrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.jobsOfRuntime(trainer.TrainingRuntimeKind))).
		WithOptions(opts).
		Complete(r)
}

// jobsOfRuntime requeues the unfinished TrainJobs that reference a runtime, so a job whose
// runtime was missing starts as soon as it is created.
func (r *TrainJobReconciler) jobsOfRuntime(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &trainer.TrainJobList{}
		opts := []client.ListOption{client.MatchingFields{indexRuntimeRef: runtimeRefKey(kind, o.GetName())}}
		if kind == trainer.TrainingRuntimeKind {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		if err := r.client.List(ctx, list, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing TrainJobs of a runtime", "runtime", o.GetName())
			return nil
		}
		var reqs []reconcile.Request
		for _, tj := range list.Items {
			if !finished(&tj.Status) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}})
			}
		}
		return reqs
	}
}

// toApplyConfiguration turns a typed object into an apply request: no status, no server
// fields, no nulls (a null would claim a field without setting it).
func toApplyConfiguration(obj runtime.Object) (*unstructuredApply, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	u := &unstructured.Unstructured{Object: pruneNulls(m).(map[string]any)}
	return &unstructuredApply{Unstructured: u, ApplyConfiguration: client.ApplyConfigurationFromUnstructured(u)}, nil
}

// unstructuredApply is an apply configuration whose Unstructured receives the applied
// object (controller-runtime decodes the response into it).
type unstructuredApply struct {
	*unstructured.Unstructured
	runtime.ApplyConfiguration
}

func pruneNulls(v any) any {
	switch o := v.(type) {
	case map[string]any:
		for k, val := range o {
			if val == nil {
				delete(o, k)
				continue
			}
			o[k] = pruneNulls(val)
		}
	case []any:
		for i := range o {
			o[i] = pruneNulls(o[i])
		}
	}
	return v
}
