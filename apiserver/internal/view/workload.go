package view

import (
	"slices"
	"strings"
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
	// PodSets are its pod sets that ask for a topology or were placed on one.
	PodSets []PodSet
	// Levels name the levels of the Topology its queue places on, where known.
	Levels []kueue.Level
	// Cluster is the worker cluster MultiKueue dispatched its job to ("" when none holds it).
	Cluster string
}

// PodSet is what Kiln shows of a Workload's pod set placed by topology-aware scheduling.
type PodSet struct {
	Name  string
	Count int32
	// Required and Preferred are the topology levels (node labels) it asks for.
	Required, Preferred string
	// Flavor is the ResourceFlavor it was admitted on ("" until admitted).
	Flavor string
	// Assignment is Kueue's topology assignment (nil until admitted on a Topology).
	Assignment *kueuev1beta2.TopologyAssignment
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
	wl.Cluster = ptr.Deref(kwl.Status.ClusterName, "")
	wl.PodSets = topologyPodSets(kwl)
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

// topologyPodSets are the pod sets of kwl that ask for a topology or were assigned one.
func topologyPodSets(kwl *kueuev1beta2.Workload) []PodSet {
	var out []PodSet
	for _, ps := range kwl.Spec.PodSets {
		p := PodSet{Name: string(ps.Name), Count: ps.Count}
		if r := ps.TopologyRequest; r != nil {
			p.Required, p.Preferred = ptr.Deref(r.Required, ""), ptr.Deref(r.Preferred, "")
		}
		if a := kwl.Status.Admission; a != nil {
			for _, psa := range a.PodSetAssignments {
				if psa.Name != ps.Name {
					continue
				}
				p.Assignment = psa.TopologyAssignment
				p.Count = ptr.Deref(psa.Count, p.Count)
				flavors := make([]string, 0, len(psa.Flavors))
				for _, f := range psa.Flavors {
					if !slices.Contains(flavors, string(f)) {
						flavors = append(flavors, string(f))
					}
				}
				slices.Sort(flavors)
				p.Flavor = strings.Join(flavors, ",")
			}
		}
		if p.Required != "" || p.Preferred != "" || p.Assignment != nil {
			out = append(out, p)
		}
	}
	return out
}
