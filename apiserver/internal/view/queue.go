package view

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/kueue"
)

// Queue is the API's view of a Kueue LocalQueue. cq is its ClusterQueue, nil when missing
// or not readable by the caller (then quota lists usage only).
func Queue(u, cqu *unstructured.Unstructured) *kilnv1.Queue {
	q := &kilnv1.Queue{Name: u.GetName(), Namespace: u.GetNamespace(), Active: true}
	lq, err := kueue.LocalQueue(u)
	if err != nil {
		q.Active, q.Message = false, err.Error()
		return q
	}
	q.ClusterQueue = string(lq.Spec.ClusterQueue)
	q.Pending, q.Reserving, q.Admitted = lq.Status.PendingWorkloads, lq.Status.ReservingWorkloads, lq.Status.AdmittedWorkloads
	if c := meta.FindStatusCondition(lq.Status.Conditions, kueuev1beta2.LocalQueueActive); c != nil && c.Status != metav1.ConditionTrue {
		q.Active, q.Message = false, c.Message
	}
	used := map[[2]string]string{}
	for _, f := range lq.Status.FlavorsUsage {
		for _, r := range f.Resources {
			used[[2]string{string(f.Name), string(r.Name)}] = r.Total.String()
			q.Quota = append(q.Quota, &kilnv1.FlavorQuota{Flavor: string(f.Name), Resource: string(r.Name), Used: r.Total.String()})
		}
	}
	if cqu != nil {
		if cq, err := kueue.ClusterQueue(cqu); err == nil {
			q.Quota = nil
			for _, g := range cq.Spec.ResourceGroups {
				for _, f := range g.Flavors {
					for _, r := range f.Resources {
						u := used[[2]string{string(f.Name), string(r.Name)}]
						if u == "" {
							u = "0"
						}
						q.Quota = append(q.Quota, &kilnv1.FlavorQuota{Flavor: string(f.Name), Resource: string(r.Name), Nominal: r.NominalQuota.String(), Used: u})
					}
				}
			}
		}
	}
	slices.SortStableFunc(q.Quota, func(a, b *kilnv1.FlavorQuota) int {
		return cmp.Or(strings.Compare(a.Flavor, b.Flavor), strings.Compare(a.Resource, b.Resource))
	})
	return q
}

// Position is where wl waits: among the pending workloads of its LocalQueue and of its
// ClusterQueue, in Kueue's order (higher priority first, then earlier queue time).
// pending are every pending workload of the ClusterQueue, wl included.
func Position(wl *Workload, clusterQueue string, pending []*Workload) *kilnv1.QueuePosition {
	pos := &kilnv1.QueuePosition{LocalQueue: wl.LocalQueue, ClusterQueue: clusterQueue, Workload: wl.Name, Admitted: wl.Admitted}
	if wl.ClusterQueue != "" {
		pos.ClusterQueue = wl.ClusterQueue
	}
	if !wl.Pending() {
		return pos
	}
	var inLocal, inCluster int32 = 1, 1
	for _, other := range pending {
		if other.Namespace == wl.Namespace && other.Name == wl.Name {
			continue
		}
		if !queuedBefore(other, wl) {
			continue
		}
		inCluster++
		if other.Namespace == wl.Namespace && other.LocalQueue == wl.LocalQueue {
			inLocal++
		}
	}
	pos.PositionInLocalQueue, pos.PositionInClusterQueue = inLocal, inCluster
	return pos
}

func queuedBefore(a, b *Workload) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.QueuedAt.Equal(b.QueuedAt) {
		return a.QueuedAt.Before(b.QueuedAt)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}
