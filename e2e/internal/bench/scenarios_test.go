package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestWaitWhileProgressing: a wait that keeps making progress outlasts its stall time as long
// as it needs (the memory scenario at 50,000 TrainJobs on a slow controller); one whose
// progress stops gives up and says where it stood.
func TestWaitWhileProgressing(t *testing.T) {
	const stall = 250 * time.Millisecond
	calls := 0
	if err := waitWhileProgressing(context.Background(), stall, "every JobSet", func() (bool, int, string) {
		calls++
		return calls == 10, calls, "" // about 1 s in all, four times the stall time
	}); err != nil {
		t.Fatalf("a wait that progressed on every poll gave up: %v", err)
	}

	calls = 0
	err := waitWhileProgressing(context.Background(), stall, "every JobSet", func() (bool, int, string) {
		calls++
		return false, min(calls, 3), fmt.Sprintf("%d of 10", min(calls, 3))
	})
	if err == nil || !strings.Contains(err.Error(), "no progress for 250ms (3 of 10)") {
		t.Fatalf("a wait whose progress stopped at 3: got %v, want it to give up naming 3 of 10", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitWhileProgressing(ctx, time.Hour, "every JobSet", func() (bool, int, string) { return false, 0, "" }); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: got %v, want context.Canceled", err)
	}
}
