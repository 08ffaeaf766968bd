package factory

import (
	"context"
	"errors"
	"fmt"
	"net"

	"connectrpc.com/connect"
)

// Exit codes of the CLI.
const (
	ExitOK      = 0
	ExitError   = 1
	ExitUsage   = 2
	ExitFailed  = 3 // the job failed (kiln wait, submit --wait)
	ExitTimeout = 4 // waiting timed out
)

// ExitErr ends the CLI with Code after printing Err (when not nil).
type ExitErr struct {
	Code int
	Err  error
}

func (e *ExitErr) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitErr) Unwrap() error { return e.Err }

// UsageError is a mistake in how the command was called.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError (exit code 2).
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// Errorf returns a plain error (exit code 1).
func Errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// ExitCode is the exit code err deserves.
func ExitCode(err error) int {
	var ee *ExitErr
	var ue *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &ue):
		return ExitUsage
	}
	return ExitError
}

// Message is the one line the CLI prints for err: the server's own message (which names
// the field or permission at fault), with what to do for the errors a user can fix here.
func Message(err error, server string) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.DeadlineExceeded) {
			return "timed out: " + err.Error()
		}
		return err.Error()
	}
	msg := ce.Message()
	var netErr net.Error
	switch ce.Code() {
	case connect.CodeUnauthenticated:
		return msg + " (set a token with `kiln config set-context --token` or KILN_TOKEN)"
	case connect.CodeUnavailable:
		if errors.As(err, &netErr) {
			return fmt.Sprintf("cannot reach the Kiln API server at %s: %s (check `kiln config view` or KILN_SERVER)", server, msg)
		}
	case connect.CodeUnimplemented:
		return fmt.Sprintf("the server at %s does not serve this call: %s (is it a Kiln API server of this version? `kiln version`)", server, msg)
	}
	return msg
}
