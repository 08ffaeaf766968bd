// Package convert turns Kubernetes objects into Kiln API messages and back: a TrainJob
// and what it owns into one truthful state, steps and timers; a request into a TrainJob.
// Everything here is pure: no clients, no clocks.
package convert

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Workload is what Kiln needs of a Kueue Workload.
type Workload struct {
	Name         string
	Namespace    string
	LocalQueue   string
	ClusterQueue string // set once quota is reserved
	Priority     int32
	// Active is false once someone deactivated it (spec.active=false): Kueue will not
	// admit it again until it is reactivated.
	Active        bool
	QuotaReserved bool
	Admitted      bool
	Finished      bool
	// Pending is the QuotaReserved=False condition: why Kueue has not admitted it.
	PendingReason, PendingMessage string
	// Evicted is the Evicted=True condition: why Kueue stopped it (Preempted,
	// Deactivated, PodsReadyTimeout, ...).
	EvictedReason, EvictedMessage string
	// QueuedAt orders pending workloads of equal priority, as Kueue does: the last
	// eviction, else creation.
	QueuedAt time.Time
}

// WorkloadFrom reads a Kueue v1beta2 Workload.
func WorkloadFrom(u *unstructured.Unstructured) *Workload {
	if u == nil {
		return nil
	}
	wl := &Workload{Name: u.GetName(), Namespace: u.GetNamespace(), Active: true, QueuedAt: u.GetCreationTimestamp().Time}
	wl.LocalQueue, _, _ = unstructured.NestedString(u.Object, "spec", "queueName")
	wl.Priority = int32(nestedInt(u.Object, "spec", "priority"))
	if a, ok, _ := unstructured.NestedBool(u.Object, "spec", "active"); ok {
		wl.Active = a
	}
	wl.ClusterQueue, _, _ = unstructured.NestedString(u.Object, "status", "admission", "clusterQueue")
	conds := conditionsOf(u)
	wl.QuotaReserved = meta.IsStatusConditionTrue(conds, "QuotaReserved")
	wl.Admitted = meta.IsStatusConditionTrue(conds, "Admitted")
	wl.Finished = meta.IsStatusConditionTrue(conds, "Finished")
	if c := meta.FindStatusCondition(conds, "QuotaReserved"); c != nil && c.Status == metav1.ConditionFalse {
		wl.PendingReason, wl.PendingMessage = c.Reason, c.Message
	}
	if c := meta.FindStatusCondition(conds, "Evicted"); c != nil {
		if c.Status == metav1.ConditionTrue {
			wl.EvictedReason, wl.EvictedMessage = c.Reason, c.Message
		}
		wl.QueuedAt = c.LastTransitionTime.Time
	}
	return wl
}

// Pending reports whether the workload waits in its queue for quota.
func (w *Workload) Pending() bool {
	return w != nil && w.Active && !w.QuotaReserved && !w.Finished
}

func conditionsOf(u *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	conds := make([]metav1.Condition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			conds = append(conds, c)
		}
	}
	return conds
}
