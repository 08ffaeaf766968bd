package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestForEachOf(t *testing.T) {
	items := make(chan int, 100)
	for i := range 100 {
		items <- i
	}
	close(items)
	var mu sync.Mutex
	seen := map[int]bool{}
	if err := forEachOf(context.Background(), items, 8, func(i int) error {
		mu.Lock()
		defer mu.Unlock()
		seen[i] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 100 {
		t.Fatalf("do was called for %d items, want every one of 100", len(seen))
	}
}

func TestForEachOfStopsAtTheFirstError(t *testing.T) {
	items := make(chan int, 100)
	for i := range 100 {
		items <- i
	}
	close(items)
	boom := errors.New("boom")
	var mu sync.Mutex
	calls := 0
	err := forEachOf(context.Background(), items, 1, func(i int) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the first error", err)
	}
	if calls != 4 {
		t.Fatalf("do was called %d times, want 4 (items 0–3, then none after the error)", calls)
	}
	if _, open := <-items; open {
		t.Fatal("items were left in the channel: a sender would block")
	}
}
