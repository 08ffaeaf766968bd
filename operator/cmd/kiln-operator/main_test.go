package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestSetGCPercent(t *testing.T) {
	was := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(was) })

	if err := setGCPercent(defaultGCPercent, ""); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("without GOGC, the collector's target is %d, want --gc-percent's %d", got, defaultGCPercent)
	}
	// GOGC set: the runtime read it at start, and the flag leaves it be.
	if err := setGCPercent(50, "200"); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the flag changed the collector's target to %d", got)
	}
	for _, bad := range []int{0, -1} {
		err := setGCPercent(bad, "")
		if err == nil || !strings.Contains(err.Error(), "--gc-percent") {
			t.Errorf("--gc-percent=%d: got %v, want an error naming the flag", bad, err)
		}
		if got := debug.SetGCPercent(100); got != 100 {
			t.Errorf("--gc-percent=%d changed the collector's target to %d", bad, got)
		}
	}
}
