package kube

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func job(ns, name, uid string, l map[string]string) trainer.TrainJob {
	return trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Labels: l}}
}

func names(items []*trainer.TrainJob) []string {
	var out []string
	for _, tj := range items {
		out = append(out, tj.Namespace+"/"+tj.Name+"@"+string(tj.UID))
	}
	return out
}

func ptrs(jobs ...trainer.TrainJob) []*trainer.TrainJob {
	out := make([]*trainer.TrainJob, len(jobs))
	for i := range jobs {
		out[i] = &jobs[i]
	}
	return out
}

func equal(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestRecentListsCreatesTheCacheHasNotSeen(t *testing.T) {
	r := NewRecent(clocktesting.NewFakePassiveClock(time.Now()))
	created := job("a", "b", "new", map[string]string{"team": "nlp"})
	r.Created(&created)
	other := job("b", "x", "other", nil)
	r.Created(&other)
	cron := kiln.CronTrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "b", UID: "cron"}}
	r.Created(&cron)

	cached := ptrs(job("a", "c", "1", nil), job("a", "a", "2", nil))
	equal(t, names(SortedWithRecent(r, cached, "a", labels.Everything())), []string{"a/a@2", "a/b@new", "a/c@1"})
	equal(t, names(SortedWithRecent(r, []*trainer.TrainJob{}, "", labels.Everything())), []string{"a/b@new", "b/x@other"})

	nlp := labels.SelectorFromSet(labels.Set{"team": "nlp"})
	equal(t, names(SortedWithRecent(r, []*trainer.TrainJob{}, "", nlp)), []string{"a/b@new"})
	equal(t, names(SortedWithRecent(r, []*trainer.TrainJob{}, "b", nlp)), nil)

	// The cache holds it: listed once.
	equal(t, names(SortedWithRecent(r, ptrs(job("a", "b", "new", nil)), "a", labels.Everything())), []string{"a/b@new"})
	// The cache still holds an older job of the name (deleted before the create): the new one is listed.
	equal(t, names(SortedWithRecent(r, ptrs(job("a", "b", "old", nil)), "a", labels.Everything())), []string{"a/b@new"})

	crons := SortedWithRecent(r, []*kiln.CronTrainJob{}, "a", labels.Everything())
	if len(crons) != 1 || crons[0].UID != "cron" {
		t.Fatalf("CronTrainJobs: got %v, want the created one", crons)
	}
}

func TestRecentForgetsWhatTheCacheAddsOrWhatIsDeleted(t *testing.T) {
	r := NewRecent(clocktesting.NewFakePassiveClock(time.Now()))
	a, b := job("a", "a", "1", nil), job("a", "b", "2", nil)
	r.Created(&a)
	r.Created(&b)
	r.seen(&a)
	r.Forget(&b)
	equal(t, names(SortedWithRecent(r, []*trainer.TrainJob{}, "", labels.Everything())), nil)
	if len(r.m) != 0 {
		t.Fatalf("%d entries left", len(r.m))
	}
}

func TestRecentDropsEntriesTheCacheNeverAdds(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Now())
	r := NewRecent(clock)
	// Created and deleted by someone else before the cache saw it: no add event.
	lost := job("a", "lost", "1", nil)
	r.Created(&lost)
	clock.SetTime(clock.Now().Add(recentTTL + time.Second))
	next := job("a", "next", "2", nil)
	r.Created(&next)
	equal(t, names(SortedWithRecent(r, []*trainer.TrainJob{}, "", labels.Everything())), []string{"a/next@2"})
	if len(r.m) != 1 {
		t.Fatalf("%d entries left, want 1", len(r.m))
	}
}

func TestRecentKeepsItsOwnCopy(t *testing.T) {
	r := NewRecent(clocktesting.NewFakePassiveClock(time.Now()))
	tj := job("a", "a", "1", map[string]string{"team": "nlp"})
	r.Created(&tj)
	tj.Labels["team"] = "changed"
	got := SortedWithRecent(r, []*trainer.TrainJob{}, "", labels.Everything())
	if got[0].Labels["team"] != "nlp" {
		t.Fatalf("the entry changed with the caller's object: %v", got[0].Labels)
	}
}

func version(tj trainer.TrainJob, rv string, l map[string]string) trainer.TrainJob {
	tj.ResourceVersion, tj.Labels = rv, l
	return tj
}

// A version a watch delivered before the cache has it is what lists and gets show, until
// the cache reaches it: a client that watched a job complete then finds it complete.
func TestRecentShowsAWatchedVersionUntilTheCacheHasIt(t *testing.T) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	cachedAt10 := version(job("team", "a", "a1", nil), "10", map[string]string{"v": "10"})
	if err := store.Add(&cachedAt10); err != nil {
		t.Fatal(err)
	}
	n := NewNames(store)
	r := NewRecent(clocktesting.NewFakePassiveClock(time.Now()))
	label := func(items []*trainer.TrainJob) []string {
		var out []string
		for _, tj := range items {
			out = append(out, tj.Name+"@"+tj.Labels["v"])
		}
		return out
	}
	list := func() []string {
		return label(slices.Collect(SortedAfter[trainer.TrainJob](r, n, "team", nil, "")))
	}
	get := func() string {
		if latest, ok := Latest(r, &cachedAt10); ok {
			return latest.Labels["v"]
		}
		return "cache"
	}
	equal(t, list(), []string{"a@10"})

	watched12 := version(job("team", "a", "a1", nil), "12", map[string]string{"v": "12"})
	r.Observed(&watched12)
	equal(t, list(), []string{"a@12"})
	equal(t, label(SortedWithRecent(r, ptrs(cachedAt10), "team", labels.Everything())), []string{"a@12"})
	if got := get(); got != "12" {
		t.Errorf("get: %s, want the watched version 12", got)
	}
	// An older version watched later (another caller's watch, behind) changes nothing.
	watched11 := version(job("team", "a", "a1", nil), "11", map[string]string{"v": "11"})
	r.Observed(&watched11)
	equal(t, list(), []string{"a@12"})

	// The cache's update to 11: still behind.
	r.caughtUp(&watched11)
	equal(t, list(), []string{"a@12"})
	// At 12 (or later): the cache's again, the entry dropped.
	cachedAt12 := version(job("team", "a", "a1", nil), "12", map[string]string{"v": "cache 12"})
	if err := store.Update(&cachedAt12); err != nil {
		t.Fatal(err)
	}
	r.caughtUp(&cachedAt12)
	equal(t, list(), []string{"a@cache 12"})
	if len(r.m) != 0 {
		t.Errorf("%d entries left after the cache caught up", len(r.m))
	}

	// Not newer than the cache's copy (an old watch event): the cache's is listed.
	r.Observed(&watched11)
	equal(t, list(), []string{"a@cache 12"})
	if _, ok := Latest(r, &cachedAt12); ok {
		t.Error("Latest returned a version older than the cache's")
	}

	// Deleted: the entry goes, but not that of another job of the name created since.
	r.Observed(&watched12)
	r.Deleted(toolscache.DeletedFinalStateUnknown{Key: "team/a", Obj: &cachedAt12})
	if len(r.m) != 0 {
		t.Errorf("%d entries left after the deletion", len(r.m))
	}
	recreated := job("team", "a", "a2", nil)
	r.Created(&recreated)
	r.Deleted(&cachedAt12)
	if len(r.m) != 1 {
		t.Error("the deletion of the old job dropped the entry of the one created since")
	}
}

// A deletion a watch delivered before the cache has it hides the job from gets and lists
// until the cache deletes it too: a client that watched a job's TTL delete it and then gets
// it is told it is not found (CI saw the Python SDK's get return the cache's copy).
func TestRecentHidesAWatchedDeletionUntilTheCacheDeletesIt(t *testing.T) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	cached := version(job("team", "a", "a1", nil), "10", nil)
	other := version(job("team", "b", "b1", nil), "11", nil)
	for _, tj := range []*trainer.TrainJob{&cached, &other} {
		if err := store.Add(tj); err != nil {
			t.Fatal(err)
		}
	}
	n := NewNames(store)
	r := NewRecent(clocktesting.NewFakePassiveClock(time.Now()))
	list := func() []string {
		return names(slices.Collect(SortedAfter[trainer.TrainJob](r, n, "team", nil, "")))
	}
	unsorted := func() []string {
		return names(SortedWithRecent(r, ptrs(cached, other), "", labels.Everything()))
	}
	equal(t, list(), []string{"team/a@a1", "team/b@b1"})

	deleted := version(job("team", "a", "a1", nil), "15", nil)
	r.Gone(&deleted)
	if !r.IsGone(&cached) {
		t.Fatal("a get finds the cache's copy of a job a watch saw deleted")
	}
	if _, ok := Latest(r, &cached); ok {
		t.Error("Latest returned the deleted job")
	}
	equal(t, list(), []string{"team/b@b1"})
	equal(t, unsorted(), []string{"team/b@b1"})
	if r.IsGone(&other) {
		t.Error("another job is gone too")
	}

	// Neither an older version watched later nor the cache's updates and adds of the job
	// (it is behind) bring it back.
	watched := version(job("team", "a", "a1", nil), "12", nil)
	r.Observed(&watched)
	r.caughtUp(&watched)
	r.seen(&cached)
	if !r.IsGone(&cached) {
		t.Fatal("the deleted job is back")
	}
	equal(t, list(), []string{"team/b@b1"})

	// The cache deletes it: the tombstone goes.
	if err := store.Delete(&cached); err != nil {
		t.Fatal(err)
	}
	n.Changed()
	r.Deleted(&cached)
	if len(r.m) != 0 {
		t.Errorf("%d entries left after the cache deleted the job", len(r.m))
	}
	equal(t, list(), []string{"team/b@b1"})

	// The deletion of an older job of a name, seen after a newer one was created, changes
	// nothing: the newer job is listed.
	recreated := version(job("team", "a", "a2", nil), "20", nil)
	r.Created(&recreated)
	r.Gone(&deleted)
	equal(t, list(), []string{"team/a@a2", "team/b@b1"})
	if r.IsGone(&recreated) {
		t.Error("the job created since is gone")
	}
}
