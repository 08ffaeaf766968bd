package kueue

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Capacity is the most of each resource ClusterQueue cq can ever admit for one workload,
// borrowing included: for each resource it covers, the sum over its flavors of the flavor's
// nominal quota plus what it may borrow of that flavor from its cohort, which is the other
// members' lendable quota (lendingLimit, else nominal) and the Cohort's own quota, capped by
// the flavor's borrowingLimit. members are the ClusterQueues of cq's cohort (cq among them
// or not); cohort is the Cohort object of that name, nil when there is none.
//
// known is false when the most cannot be known from these objects: the cohort has a parent
// (hierarchical cohorts lend along a tree). Callers then judge nothing.
func Capacity(cq *kueuev1beta2.ClusterQueue, members []kueuev1beta2.ClusterQueue, cohort *kueuev1beta2.Cohort) (most corev1.ResourceList, known bool) {
	inCohort := cq.Spec.CohortName != ""
	if inCohort && cohort != nil && cohort.Spec.ParentName != "" {
		return nil, false
	}
	// lendable[flavor][resource] is what the cohort lends of it to cq.
	lendable := map[kueuev1beta2.ResourceFlavorReference]corev1.ResourceList{}
	add := func(flavor kueuev1beta2.ResourceFlavorReference, name corev1.ResourceName, q resource.Quantity) {
		if lendable[flavor] == nil {
			lendable[flavor] = corev1.ResourceList{}
		}
		sum := lendable[flavor][name]
		sum.Add(q)
		lendable[flavor][name] = sum
	}
	if inCohort {
		for i := range members {
			m := &members[i]
			if m.Name == cq.Name || m.Spec.CohortName != cq.Spec.CohortName {
				continue
			}
			eachQuota(m.Spec.ResourceGroups, func(flavor kueuev1beta2.ResourceFlavorReference, r kueuev1beta2.ResourceQuota) {
				if r.LendingLimit != nil {
					add(flavor, r.Name, *r.LendingLimit)
					return
				}
				add(flavor, r.Name, r.NominalQuota)
			})
		}
		if cohort != nil {
			eachQuota(cohort.Spec.ResourceGroups, func(flavor kueuev1beta2.ResourceFlavorReference, r kueuev1beta2.ResourceQuota) {
				add(flavor, r.Name, r.NominalQuota)
			})
		}
	}
	most = corev1.ResourceList{}
	eachQuota(cq.Spec.ResourceGroups, func(flavor kueuev1beta2.ResourceFlavorReference, r kueuev1beta2.ResourceQuota) {
		q := r.NominalQuota.DeepCopy()
		if inCohort {
			borrow := lendable[flavor][r.Name]
			if r.BorrowingLimit != nil && r.BorrowingLimit.Cmp(borrow) < 0 {
				borrow = r.BorrowingLimit.DeepCopy()
			}
			q.Add(borrow)
		}
		sum := most[r.Name]
		sum.Add(q)
		most[r.Name] = sum
	})
	return most, true
}

func eachQuota(groups []kueuev1beta2.ResourceGroup, f func(kueuev1beta2.ResourceFlavorReference, kueuev1beta2.ResourceQuota)) {
	for _, g := range groups {
		for _, fl := range g.Flavors {
			for _, r := range fl.Resources {
				f(fl.Name, r)
			}
		}
	}
}

// Shortfall says which of requests are more than most allows, as "64 nvidia.com/gpu (at
// most 32)", sorted by resource name. Resources most does not cover are left out: whether
// Kueue counts them depends on its configuration, so only what it surely counts is judged.
func Shortfall(requests, most corev1.ResourceList) []string {
	var out []string
	for name, want := range requests {
		limit, ok := most[name]
		if !ok || want.Cmp(limit) <= 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s (at most %s)", count(want), name, count(limit)))
	}
	slices.SortFunc(out, func(a, b string) int {
		return strings.Compare(resourceOf(a), resourceOf(b))
	})
	return out
}

// count is a quantity as people count it: 8000 GPUs, not 8k; 500m or 64Gi as written.
func count(q resource.Quantity) string {
	if q.Format == resource.DecimalSI && q.MilliValue()%1000 == 0 {
		return strconv.FormatInt(q.Value(), 10)
	}
	return q.String()
}

func resourceOf(s string) string {
	_, rest, _ := strings.Cut(s, " ")
	return rest
}
