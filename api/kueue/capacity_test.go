package kueue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

type quota struct {
	flavor          string
	gpus            string
	borrow, lending *string
}

func clusterQueue(name, cohort string, quotas ...quota) kueuev1beta2.ClusterQueue {
	cq := kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cq.Spec.CohortName = kueuev1beta2.CohortReference(cohort)
	g := kueuev1beta2.ResourceGroup{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"}}
	for _, q := range quotas {
		r := kueuev1beta2.ResourceQuota{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(q.gpus)}
		if q.borrow != nil {
			r.BorrowingLimit = ptr.To(resource.MustParse(*q.borrow))
		}
		if q.lending != nil {
			r.LendingLimit = ptr.To(resource.MustParse(*q.lending))
		}
		g.Flavors = append(g.Flavors, kueuev1beta2.FlavorQuotas{Name: kueuev1beta2.ResourceFlavorReference(q.flavor), Resources: []kueuev1beta2.ResourceQuota{r}})
	}
	cq.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{g}
	return cq
}

func TestCapacity(t *testing.T) {
	cases := map[string]struct {
		cq        kueuev1beta2.ClusterQueue
		members   []kueuev1beta2.ClusterQueue
		cohort    *kueuev1beta2.Cohort
		wantGPUs  string
		wantKnown bool
	}{
		"alone: its nominal quota": {
			cq: clusterQueue("a", "", quota{flavor: "a100", gpus: "32"}), wantGPUs: "32", wantKnown: true,
		},
		"flavors add up": {
			cq: clusterQueue("a", "", quota{flavor: "a100", gpus: "32"}, quota{flavor: "h100", gpus: "16"}), wantGPUs: "48", wantKnown: true,
		},
		"a cohort lends its members' quota of the same flavor": {
			cq:       clusterQueue("a", "pool", quota{flavor: "a100", gpus: "32"}),
			members:  []kueuev1beta2.ClusterQueue{clusterQueue("a", "pool", quota{flavor: "a100", gpus: "32"}), clusterQueue("b", "pool", quota{flavor: "a100", gpus: "16"}, quota{flavor: "h100", gpus: "8"}), clusterQueue("c", "other", quota{flavor: "a100", gpus: "64"})},
			wantGPUs: "48", wantKnown: true,
		},
		"lendingLimit caps what a member lends": {
			cq:       clusterQueue("a", "pool", quota{flavor: "a100", gpus: "32"}),
			members:  []kueuev1beta2.ClusterQueue{clusterQueue("b", "pool", quota{flavor: "a100", gpus: "16", lending: ptr.To("4")})},
			wantGPUs: "36", wantKnown: true,
		},
		"borrowingLimit caps what it borrows": {
			cq:       clusterQueue("a", "pool", quota{flavor: "a100", gpus: "32", borrow: ptr.To("2")}),
			members:  []kueuev1beta2.ClusterQueue{clusterQueue("b", "pool", quota{flavor: "a100", gpus: "16"})},
			wantGPUs: "34", wantKnown: true,
		},
		"the Cohort's own quota lends too": {
			cq:       clusterQueue("a", "pool", quota{flavor: "a100", gpus: "8"}),
			cohort:   &kueuev1beta2.Cohort{Spec: kueuev1beta2.CohortSpec{ResourceGroups: clusterQueue("x", "", quota{flavor: "a100", gpus: "8"}).Spec.ResourceGroups}},
			wantGPUs: "16", wantKnown: true,
		},
		"a cohort with a parent: unknown": {
			cq:     clusterQueue("a", "pool", quota{flavor: "a100", gpus: "8"}),
			cohort: &kueuev1beta2.Cohort{Spec: kueuev1beta2.CohortSpec{ParentName: "org"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			most, known := Capacity(&tc.cq, tc.members, tc.cohort)
			if known != tc.wantKnown {
				t.Fatalf("known = %v, want %v", known, tc.wantKnown)
			}
			if !known {
				return
			}
			got := most["nvidia.com/gpu"]
			if got.Cmp(resource.MustParse(tc.wantGPUs)) != 0 {
				t.Errorf("GPUs = %s, want %s", got.String(), tc.wantGPUs)
			}
		})
	}
}

func TestShortfall(t *testing.T) {
	most := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("32"), "cpu": resource.MustParse("100")}
	requests := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("64"), "cpu": resource.MustParse("100"), "example.com/fpga": resource.MustParse("1")}
	got := Shortfall(requests, most)
	if diff := cmp.Diff([]string{"64 nvidia.com/gpu (at most 32)"}, got); diff != "" {
		t.Errorf("Shortfall mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"512Gi memory (at most 256Gi)", "8000 nvidia.com/gpu (at most 32)"},
		Shortfall(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8k"), "memory": resource.MustParse("512Gi")}, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("32"), "memory": resource.MustParse("256Gi")})); diff != "" {
		t.Errorf("Shortfall counts as people do (-want +got):\n%s", diff)
	}
	if got := Shortfall(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("32")}, most); len(got) != 0 {
		t.Errorf("Shortfall = %q for a job that fits", got)
	}
}
