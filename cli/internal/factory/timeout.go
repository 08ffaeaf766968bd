package factory

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
)

// WithTimeout is context.WithTimeout on f.Clock, so that a test passes the time instead of
// waiting for it. A timeout of 0 or less never passes. TimedOut tells whether it passed.
func (f *Factory) WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if d > 0 {
		t := f.Clock.NewTimer(d)
		go func() {
			defer t.Stop()
			select {
			case <-t.C():
				cancel(context.DeadlineExceeded)
			case <-ctx.Done():
			}
		}()
	}
	return ctx, func() { cancel(nil) }
}

// TimedOut reports whether err is ctx's end because the timeout of WithTimeout passed (an
// error of another kind at that moment is not).
func TimedOut(ctx context.Context, err error) bool {
	canceled := errors.Is(err, context.Canceled) || connect.CodeOf(err) == connect.CodeCanceled
	return canceled && errors.Is(context.Cause(ctx), context.DeadlineExceeded)
}
