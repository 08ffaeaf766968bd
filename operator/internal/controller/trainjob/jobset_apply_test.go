package trainjob

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kiln-ml/kiln/operator/internal/render"
)

func TestAppliedJobSets(t *testing.T) {
	tj := types.NamespacedName{Namespace: "ns", Name: "job"}
	rendering := func(suspend bool) *render.Result {
		return &render.Result{JobSet: &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "job"}, Spec: jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(suspend)}}}
	}
	h1, err := renderingHash(rendering(true))
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := renderingHash(rendering(true)); again != h1 {
		t.Fatal("the same rendering hashes differently")
	}
	h2, _ := renderingHash(rendering(false))
	if h2 == h1 {
		t.Fatal("a resumed rendering hashes like a suspended one")
	}

	var a appliedJobSets
	if a.unchanged(tj, "uid", 1, h1) {
		t.Fatal("nothing was applied yet")
	}
	a.record(tj, appliedJobSet{uid: "uid", generation: 1, rendering: h1})
	for name, tc := range map[string]struct {
		uid  types.UID
		gen  int64
		hash [32]byte
		want bool
	}{
		"same JobSet, same rendering":          {"uid", 1, h1, true},
		"rendering changed (resume, patches)":  {"uid", 1, h2, false},
		"someone else changed the JobSet spec": {"uid", 2, h1, false},
		"the JobSet was deleted and recreated": {"other", 1, h1, false},
	} {
		if got := a.unchanged(tj, tc.uid, tc.gen, tc.hash); got != tc.want {
			t.Errorf("%s: unchanged = %v, want %v", name, got, tc.want)
		}
	}
	a.forget(tj)
	if a.unchanged(tj, "uid", 1, h1) {
		t.Fatal("forgotten, yet unchanged")
	}
}
