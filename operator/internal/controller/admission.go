package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

var workloadList = trainer.KueueGroupVersion.WithKind("WorkloadList")

// admissionTime is when Kueue admitted a queued TrainJob (its Workload's Admitted
// transition), so that a job's deadline counts from its admission even when the operator
// saw the admission late or never saw the job suspended. Nil when the job is not queued,
// not admitted, or Kueue is not installed.
func (r *TrainJobReconciler) admissionTime(ctx context.Context, tj *trainer.TrainJob) *time.Time {
	if tj.Labels[trainer.KueueQueueNameLabel] == "" {
		return nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(workloadList)
	if err := r.client.List(ctx, list, ctrl.InNamespace(tj.Namespace), ctrl.MatchingLabels{trainer.KueueJobUIDLabel: string(tj.UID)}); err != nil {
		if !meta.IsNoMatchError(err) {
			klog.FromContext(ctx).V(2).Info("Could not read the TrainJob's Kueue Workload; counting from now", "err", err)
		}
		return nil
	}
	var latest *time.Time
	for _, wl := range list.Items {
		conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != "Admitted" || m["status"] != string(metav1.ConditionTrue) {
				continue
			}
			s, _ := m["lastTransitionTime"].(string)
			t, err := time.Parse(time.RFC3339, s)
			if err == nil && (latest == nil || t.After(*latest)) {
				latest = &t
			}
		}
	}
	return latest
}
