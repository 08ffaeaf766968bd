package view

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kiln-ml/kiln/api/kueue"
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

// WorkloadFrom reads a Kueue Workload held as unstructured (nil when it is nil or does not
// decode as one).
func WorkloadFrom(u *unstructured.Unstructured) *Workload {
	if u == nil {
		return nil
	}
	kwl, err := kueue.Workload(u)
	if err != nil {
		return nil
	}
	wl := &Workload{
		Name: kwl.Name, Namespace: kwl.Namespace, Active: ptr.Deref(kwl.Spec.Active, true), QueuedAt: kwl.CreationTimestamp.Time,
		LocalQueue: string(kwl.Spec.QueueName), Priority: ptr.Deref(kwl.Spec.Priority, 0),
	}
	if kwl.Status.Admission != nil {
		wl.ClusterQueue = string(kwl.Status.Admission.ClusterQueue)
	}
	conds := kwl.Status.Conditions
	wl.QuotaReserved = meta.IsStatusConditionTrue(conds, kueuev1beta2.WorkloadQuotaReserved)
	wl.Admitted = meta.IsStatusConditionTrue(conds, kueuev1beta2.WorkloadAdmitted)
	wl.Finished = meta.IsStatusConditionTrue(conds, kueuev1beta2.WorkloadFinished)
	if c := meta.FindStatusCondition(conds, kueuev1beta2.WorkloadQuotaReserved); c != nil && c.Status == metav1.ConditionFalse {
		wl.PendingReason, wl.PendingMessage = c.Reason, c.Message
	}
	if c := meta.FindStatusCondition(conds, kueuev1beta2.WorkloadEvicted); c != nil {
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
