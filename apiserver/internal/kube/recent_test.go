package kube

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
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
