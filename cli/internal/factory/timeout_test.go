package factory

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestWithTimeout(t *testing.T) {
	for name, tc := range map[string]struct {
		timeout time.Duration
		// step is how far the clock moves; cancel ends the context first.
		step         time.Duration
		cancel       bool
		wantDone     bool
		wantTimedOut bool
	}{
		"before the timeout":      {timeout: time.Minute, step: time.Minute - time.Nanosecond},
		"at the timeout":          {timeout: time.Minute, step: time.Minute, wantDone: true, wantTimedOut: true},
		"canceled first":          {timeout: time.Minute, cancel: true, step: time.Minute, wantDone: true},
		"no timeout":              {step: 1000 * time.Hour},
		"negative, as no timeout": {timeout: -time.Second, step: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			f := &Factory{Clock: clk}
			ctx, cancel := f.WithTimeout(t.Context(), tc.timeout)
			defer cancel()
			if tc.cancel {
				cancel()
			}
			clk.Step(tc.step)
			if tc.wantDone {
				<-ctx.Done()
			}
			if done := ctx.Err() != nil; done != tc.wantDone {
				t.Errorf("context done: %v, want %v", done, tc.wantDone)
			}
			if got := TimedOut(ctx, ctx.Err()); got != tc.wantTimedOut {
				t.Errorf("TimedOut() = %v, want %v", got, tc.wantTimedOut)
			}
		})
	}
}

func TestTimedOutOtherError(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	ctx, cancel := (&Factory{Clock: clk}).WithTimeout(t.Context(), time.Second)
	defer cancel()
	clk.Step(time.Second)
	<-ctx.Done()
	// The job was deleted, say, as the timeout passed: that is what happened, not a timeout.
	if TimedOut(ctx, errors.New("the job was deleted")) {
		t.Errorf("TimedOut() = true for an error other than the context's end")
	}
	if !TimedOut(ctx, context.Canceled) {
		t.Errorf("TimedOut() = false for the context's end")
	}
}
