package kiln

import (
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

// Error is an error of the Kiln API: its Connect code, the server's message (which names
// the field or the permission at fault), and the details the server sent. Every call of
// this package returns one for an answer of the server; match a code with errors.Is and
// the Err* values (errors.Is(err, kiln.ErrNotFound)), or read the fields with errors.As.
type Error struct {
	Code    connect.Code
	Message string
	// FieldViolations are the request's fields that are wrong (a google.rpc.BadRequest).
	FieldViolations []FieldViolation
	// RetryAfter is how long the server asks to wait before retrying (google.rpc.RetryInfo).
	RetryAfter time.Duration
	err        *connect.Error
}

// FieldViolation is a field of a request that is wrong, e.g. train_job.spec.nodes.
type FieldViolation struct {
	Field, Description string
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Message }

// Unwrap returns the Connect error (nil for an error this package made itself, e.g. a
// wait's timeout: a nil *connect.Error would pass for one).
func (e *Error) Unwrap() error {
	if e.err == nil {
		return nil
	}
	return e.err
}

// Is matches the Err* value of e's code.
func (e *Error) Is(target error) bool {
	var c codeError
	return errors.As(target, &c) && connect.Code(c) == e.Code
}

// codeError is the type of the Err* values: one per Connect code.
type codeError connect.Code

func (c codeError) Error() string { return connect.Code(c).String() }

// One error value per Connect code, for errors.Is.
var (
	ErrCanceled           error = codeError(connect.CodeCanceled)
	ErrUnknown            error = codeError(connect.CodeUnknown)
	ErrInvalidArgument    error = codeError(connect.CodeInvalidArgument)
	ErrDeadlineExceeded   error = codeError(connect.CodeDeadlineExceeded)
	ErrNotFound           error = codeError(connect.CodeNotFound)
	ErrAlreadyExists      error = codeError(connect.CodeAlreadyExists)
	ErrPermissionDenied   error = codeError(connect.CodePermissionDenied)
	ErrResourceExhausted  error = codeError(connect.CodeResourceExhausted)
	ErrFailedPrecondition error = codeError(connect.CodeFailedPrecondition)
	ErrAborted            error = codeError(connect.CodeAborted)
	ErrOutOfRange         error = codeError(connect.CodeOutOfRange)
	ErrUnimplemented      error = codeError(connect.CodeUnimplemented)
	ErrInternal           error = codeError(connect.CodeInternal)
	ErrUnavailable        error = codeError(connect.CodeUnavailable)
	ErrDataLoss           error = codeError(connect.CodeDataLoss)
	ErrUnauthenticated    error = codeError(connect.CodeUnauthenticated)
)

// wrap turns a Connect error into an *Error (other errors pass unchanged).
func wrap(err error) error {
	var ce *connect.Error
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	e := &Error{Code: ce.Code(), Message: ce.Message(), err: ce}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue // a detail this SDK cannot read does not hide the error itself
		}
		switch m := v.(type) {
		case *errdetails.BadRequest:
			for _, fv := range m.GetFieldViolations() {
				e.FieldViolations = append(e.FieldViolations, FieldViolation{Field: fv.GetField(), Description: fv.GetDescription()})
			}
		case *errdetails.RetryInfo:
			e.RetryAfter = m.GetRetryDelay().AsDuration()
		}
	}
	return e
}

// JobFailedError is returned by WaitForJobStatus when the job failed and Failed was not
// among the statuses waited for.
type JobFailedError struct {
	Job *TrainJob
}

func (e *JobFailedError) Error() string {
	return fmt.Sprintf("TrainJob %s/%s failed (%s): %s", e.Job.Namespace, e.Job.Name, e.Job.Reason, e.Job.Message)
}
