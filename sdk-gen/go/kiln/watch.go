package kiln

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// The watch resumes after backoffMin, doubling up to backoffMax while it keeps dropping.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// JobGoneError ends a watch whose job is not there: it was not among the jobs the watch
// listed (Deleted false), or it was deleted while watched (Deleted true; Job is its last
// state). It matches ErrNotFound.
type JobGoneError struct {
	Namespace, Name string
	Deleted         bool
	Job             *kilnv1.TrainJob
}

func (e *JobGoneError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("TrainJob %s/%s was deleted", e.Namespace, e.Name)
	}
	return fmt.Sprintf("TrainJob %s/%s not found", e.Namespace, e.Name)
}

// Is matches ErrNotFound.
func (e *JobGoneError) Is(target error) bool { return target == ErrNotFound }

// WatchJob follows a job through the server's watch, calling until with the job on every
// change, and returns the job once until returns true. A watch that drops (the server
// restarts, a proxy ends it) is resumed from the last version seen, after 100 ms, doubling
// up to 5 s while it keeps dropping. A job that does not exist, or is deleted meanwhile,
// ends it with a *JobGoneError; the end of ctx with ctx.Err(); another error of the server
// with that error, as Connect returned it. WaitForJobStatus is built on it; use it to wait
// for a condition of your own.
func (c *Client) WatchJob(ctx context.Context, namespace, name string, until func(*kilnv1.TrainJob) bool) (*kilnv1.TrainJob, error) {
	ns := c.ns(namespace)
	rv := ""
	backoff := backoffMin
	for {
		job, done, err := c.watchOnce(ctx, ns, name, &rv, until)
		if done {
			return job, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil && !transient(ctx, err) && connect.CodeOf(err) != connect.CodeUnknown {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, backoffMax)
	}
}

// watchOnce follows one watch stream from *rv (moving it on); done says the watch is over,
// with job or err; otherwise err is why the stream ended (nil: it just ended).
func (c *Client) watchOnce(ctx context.Context, ns, name string, rv *string, until func(*kilnv1.TrainJob) bool) (*kilnv1.TrainJob, bool, error) {
	stream, err := c.Jobs.WatchTrainJobs(ctx, connect.NewRequest(&kilnv1.WatchTrainJobsRequest{Namespace: ns, Name: name, ResourceVersion: *rv}))
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = stream.Close() }()
	// A stream starts with the jobs as they are (unless it resumes), then SYNCED: a job not
	// seen by then does not exist.
	seen := false
	for stream.Receive() {
		ev := stream.Msg()
		if ev.GetResourceVersion() != "" {
			*rv = ev.GetResourceVersion()
		}
		switch ev.GetType() {
		case kilnv1.WatchEventType_WATCH_EVENT_TYPE_DELETED:
			return nil, true, &JobGoneError{Namespace: ns, Name: name, Deleted: true, Job: ev.GetTrainJob()}
		case kilnv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED:
			if !seen {
				return nil, true, &JobGoneError{Namespace: ns, Name: name}
			}
		case kilnv1.WatchEventType_WATCH_EVENT_TYPE_ADDED, kilnv1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED:
			seen = true
			if j := ev.GetTrainJob(); until(j) {
				return j, true, nil
			}
		}
	}
	return nil, false, stream.Err()
}

// errorOfWait words the end of a wait for name in ns.
func errorOfWait(err error, ns, name, want string, timeout time.Duration, timedOut bool) error {
	var gone *JobGoneError
	switch {
	case errors.As(err, &gone) && gone.Deleted:
		return &Error{Code: connect.CodeNotFound, Message: fmt.Sprintf("TrainJob %s/%s was deleted while waiting for it", ns, name)}
	case errors.As(err, &gone):
		return &Error{Code: connect.CodeNotFound, Message: fmt.Sprintf("TrainJob %q not found in namespace %s", name, ns)}
	case timedOut:
		return &Error{Code: connect.CodeDeadlineExceeded, Message: fmt.Sprintf("TrainJob %s/%s did not reach %s in %s", ns, name, want, timeout)}
	}
	return wrap(err)
}
