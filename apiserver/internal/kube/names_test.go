package kube

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Pages in the order of namespace, then name, from the informer's store by key, with this
// server's creates the cache does not hold yet.
func TestSortedAfter(t *testing.T) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for _, tj := range []trainer.TrainJob{
		job("team", "z", "z1", nil), job("team", "a", "a1", map[string]string{"team": "nlp"}), job("team-b", "a", "ba1", nil),
		job("other", "x", "x1", nil), job("team", "c", "c-old", nil),
	} {
		if err := store.Add(&tj); err != nil {
			t.Fatal(err)
		}
	}
	n := NewNames(store)
	r := NewRecent(clocktesting.NewFakePassiveClock(time.Now()))
	list := func(namespace string, selector labels.Selector, after string) []string {
		return names(slices.Collect(SortedAfter[trainer.TrainJob](r, n, namespace, selector, after)))
	}
	equal(t, list("team", nil, ""), []string{"team/a@a1", "team/c@c-old", "team/z@z1"})
	equal(t, list("team", nil, "team/c"), []string{"team/z@z1"})
	equal(t, list("team", nil, "team/b"), []string{"team/c@c-old", "team/z@z1"})
	// "team-b/a" < "team/z" as strings, but namespace team-b comes after all of team.
	equal(t, list("", nil, "team/z"), []string{"team-b/a@ba1"})
	equal(t, list("", nil, ""), []string{"other/x@x1", "team/a@a1", "team/c@c-old", "team/z@z1", "team-b/a@ba1"})
	equal(t, list("team", labels.SelectorFromSet(labels.Set{"team": "nlp"}), ""), []string{"team/a@a1"})
	equal(t, list("nobody", nil, ""), nil)

	// Created through this server, not cached yet: b between a and c; c again, after the
	// cached one of that name was deleted.
	b, c := job("team", "b", "b1", nil), job("team", "c", "c-new", nil)
	r.Created(&b)
	r.Created(&c)
	equal(t, list("team", nil, ""), []string{"team/a@a1", "team/b@b1", "team/c@c-new", "team/z@z1"})
	equal(t, list("team", nil, "team/b"), []string{"team/c@c-new", "team/z@z1"})

	// Deleted from the cache: gone at once, before the order is sorted again.
	if err := store.Delete(&trainer.TrainJob{ObjectMeta: b.ObjectMeta}); err != nil {
		t.Fatal(err)
	}
	zz := job("team", "zz", "zz1", nil)
	if err := store.Add(&zz); err != nil {
		t.Fatal(err)
	}
	z := job("team", "z", "z1", nil)
	if err := store.Delete(&z); err != nil {
		t.Fatal(err)
	}
	equal(t, list("team", nil, ""), []string{"team/a@a1", "team/b@b1", "team/c@c-new"})
	// Added: listed once the informer says the names changed.
	n.Changed()
	equal(t, list("team", nil, ""), []string{"team/a@a1", "team/b@b1", "team/c@c-new", "team/zz@zz1"})
}
