package trainjob

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

func TestExpectations(t *testing.T) {
	tj := types.NamespacedName{Namespace: "ns", Name: "job"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	js := func(uid types.UID) *jobsetv1alpha2.JobSet {
		return &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{UID: uid}}
	}
	var e expectations
	if e.pending(tj, "1", nil, now) {
		t.Fatal("nothing was written, yet pending")
	}

	// A status write replaced version 10 with 12 (someone else wrote 11 in between): the
	// cache is behind while it shows a version older than 12.
	e.statusWritten(tj, "10", "12", now)
	for _, behind := range []string{"10", "11"} {
		if !e.pending(tj, behind, nil, now) {
			t.Fatalf("the cache shows %s, older than the write, yet not pending", behind)
		}
	}
	if e.pending(tj, "13", nil, now) {
		t.Fatal("the cache shows a version past the write, yet pending")
	}
	if e.pending(tj, "10", nil, now) {
		t.Fatal("once caught up, an expectation is forgotten; an old version again is not ours to wait for")
	}

	// Versions that do not compare: behind while the cache shows the replaced one.
	e.statusWritten(tj, "a", "c", now)
	if !e.pending(tj, "a", nil, now) {
		t.Fatal("the cache still shows the replaced version, yet not pending")
	}
	if e.pending(tj, "b", nil, now) {
		t.Fatal("the cache shows another version, yet pending")
	}

	// A created JobSet: pending until the cache shows that very JobSet.
	e.jobSetCreated(tj, "new", now)
	if !e.pending(tj, "2", nil, now) {
		t.Fatal("the cache has no JobSet yet, yet not pending")
	}
	if !e.pending(tj, "2", js("old"), now) {
		t.Fatal("the cache shows another JobSet of that name (a deleted job's), yet not pending")
	}
	if e.pending(tj, "2", js("new"), now) {
		t.Fatal("the cache shows the created JobSet, yet pending")
	}
	if e.pending(tj, "2", nil, now) {
		t.Fatal("a JobSet seen and then gone is gone: not pending")
	}

	// Both at once: pending until both are seen.
	e.statusWritten(tj, "2", "3", now)
	e.jobSetCreated(tj, "x", now)
	if !e.pending(tj, "3", nil, now) {
		t.Fatal("the JobSet is not seen yet, yet not pending")
	}
	if e.pending(tj, "3", js("x"), now) {
		t.Fatal("both seen, yet pending")
	}

	// A cache that never catches up is read as it is after the timeout.
	e.statusWritten(tj, "3", "4", now)
	if e.pending(tj, "3", nil, now.Add(expectationTimeout+time.Second)) {
		t.Fatal("past the timeout, yet pending")
	}
	e.statusWritten(tj, "3", "4", now)
	e.forget(tj)
	if e.pending(tj, "3", nil, now) {
		t.Fatal("forgotten, yet pending")
	}
}

// The map of expectations is dropped once the last one is met: a Go map keeps room for the
// most entries it ever held.
func TestExpectationsLetTheirRoomGo(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var e expectations
	for i := range 1000 {
		e.jobSetCreated(types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}, types.UID(fmt.Sprint(i)), now)
	}
	for i := range 1000 {
		key := types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}
		if e.pending(key, "1", &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprint(i))}}, now) {
			t.Fatalf("job %d: the cache shows its JobSet, yet pending", i)
		}
		if i < 999 && e.m == nil {
			t.Fatalf("dropped with %d expectations left", 999-i)
		}
	}
	if e.m != nil {
		t.Fatal("every expectation met, yet the map of 1,000 is kept")
	}
	var b statusBatches
	key := types.NamespacedName{Namespace: "ns", Name: "job"}
	if b.wait(key, true, now) == 0 || b.wait(key, true, now.Add(statusBatchPeriod)) != 0 || b.m != nil {
		t.Fatal("a batch written, yet the map kept")
	}
}
