package convert

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// Queue is the API's view of a Kueue LocalQueue. cq is its ClusterQueue, nil when missing
// or not readable by the caller (then quota lists usage only).
func Queue(lq, cq *unstructured.Unstructured) *kilnv1.Queue {
	q := &kilnv1.Queue{Name: lq.GetName(), Namespace: lq.GetNamespace()}
	q.ClusterQueue, _, _ = unstructured.NestedString(lq.Object, "spec", "clusterQueue")
	for dst, f := range map[*int32]string{&q.Pending: "pendingWorkloads", &q.Reserving: "reservingWorkloads", &q.Admitted: "admittedWorkloads"} {
		*dst = int32(nestedInt(lq.Object, "status", f))
	}
	q.Active = true
	if c := meta.FindStatusCondition(conditionsOf(lq), "Active"); c != nil && c.Status != "True" {
		q.Active, q.Message = false, c.Message
	}
	used := map[[2]string]string{}
	flavors, _, _ := unstructured.NestedSlice(lq.Object, "status", "flavorsUsage")
	for _, f := range flavors {
		fm, _ := f.(map[string]any)
		flavor, _ := fm["name"].(string)
		res, _ := fm["resources"].([]any)
		for _, r := range res {
			rm, _ := r.(map[string]any)
			name, _ := rm["name"].(string)
			total, _ := rm["total"].(string)
			used[[2]string{flavor, name}] = total
			q.Quota = append(q.Quota, &kilnv1.FlavorQuota{Flavor: flavor, Resource: name, Used: total})
		}
	}
	if cq != nil {
		q.Quota = nil
		groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
		for _, g := range groups {
			gm, _ := g.(map[string]any)
			fl, _ := gm["flavors"].([]any)
			for _, f := range fl {
				fm, _ := f.(map[string]any)
				flavor, _ := fm["name"].(string)
				res, _ := fm["resources"].([]any)
				for _, r := range res {
					rm, _ := r.(map[string]any)
					name, _ := rm["name"].(string)
					nominal := stringOf(rm["nominalQuota"])
					u := used[[2]string{flavor, name}]
					if u == "" {
						u = "0"
					}
					q.Quota = append(q.Quota, &kilnv1.FlavorQuota{Flavor: flavor, Resource: name, Nominal: nominal, Used: u})
				}
			}
		}
	}
	slices.SortStableFunc(q.Quota, func(a, b *kilnv1.FlavorQuota) int {
		return cmp.Or(strings.Compare(a.Flavor, b.Flavor), strings.Compare(a.Resource, b.Resource))
	})
	return q
}

// nestedInt reads a number however it was decoded (int64 from the API, float64 from
// generic JSON).
func nestedInt(obj map[string]any, fields ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, fields...)
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

func stringOf(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case int64:
		return strconvI(t)
	case float64:
		return strconvI(int64(t))
	}
	return ""
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
