// Package jobs holds what several commands do with a job: wait for it to reach a state
// while showing its progress, stream its logs, and suspend or resume it.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// ErrDeleted means the job was deleted while being waited for.
var ErrDeleted = errors.New("the job was deleted")

// Finished reports whether a job completed or failed.
func Finished(j *kilnv1.TrainJob) bool {
	s := j.GetStatus().GetState()
	return s == kilnv1.State_STATE_COMPLETE || s == kilnv1.State_STATE_FAILED
}

// Wait follows a job until done says so, calling progress on every change, and returns
// the job as it was then. A dropped stream is resumed from the last version seen.
func Wait(ctx context.Context, c kilnv1connect.TrainJobServiceClient, namespace, name string,
	done func(*kilnv1.TrainJob) bool, progress func(*kilnv1.TrainJob)) (*kilnv1.TrainJob, error) {
	rv := ""
	backoff := 100 * time.Millisecond
	for {
		stream, err := c.WatchTrainJobs(ctx, connect.NewRequest(&kilnv1.WatchTrainJobsRequest{Namespace: namespace, Name: name, ResourceVersion: rv}))
		if err != nil {
			return nil, err
		}
		seen := false
		for stream.Receive() {
			ev := stream.Msg()
			if ev.GetResourceVersion() != "" {
				rv = ev.GetResourceVersion()
			}
			switch ev.GetType() {
			case kilnv1.WatchEventType_WATCH_EVENT_TYPE_DELETED:
				_ = stream.Close()
				return ev.GetTrainJob(), ErrDeleted
			case kilnv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED:
				if !seen {
					_ = stream.Close()
					return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("TrainJob %s/%s not found", namespace, name))
				}
			case kilnv1.WatchEventType_WATCH_EVENT_TYPE_ADDED, kilnv1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED:
				seen = true
				j := ev.GetTrainJob()
				if progress != nil {
					progress(j)
				}
				if done(j) {
					_ = stream.Close()
					return j, nil
				}
			}
		}
		err = stream.Err()
		_ = stream.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Streams end when the server restarts or a proxy drops them: resume.
		if connect.CodeOf(err) != connect.CodeUnavailable && connect.CodeOf(err) != connect.CodeUnknown && err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// Progress draws a job's progress on one line of a terminal, rewriting it in place.
type Progress struct {
	IO  *iostreams.IOStreams
	Now func() time.Time
	len int
}

// Show draws the line for j (nothing unless standard error is a terminal).
func (p *Progress) Show(j *kilnv1.TrainJob) {
	if !p.IO.IsErrTTY() {
		return
	}
	line := Summary(p.IO, j, p.Now())
	fmt.Fprintf(p.IO.ErrOut, "\r%s\x1b[K", line)
	p.len = len(line)
}

// Done ends the line.
func (p *Progress) Done() {
	if p.IO.IsErrTTY() && p.len > 0 {
		fmt.Fprint(p.IO.ErrOut, "\r\x1b[K")
		p.len = 0
	}
}

// Summary is one line about a job: its state, why, and the next timer.
func Summary(io *iostreams.IOStreams, j *kilnv1.TrainJob, now time.Time) string {
	st := j.GetStatus()
	var b strings.Builder
	b.WriteString(j.GetName() + ": " + printer.StateColor(io, st.GetState())(printer.StateName(st.GetState())))
	if st.GetReason() != "" {
		b.WriteString(" (" + st.GetReason() + ")")
	}
	if q := st.GetQueue(); st.GetState() == kilnv1.State_STATE_QUEUED && q.GetPositionInLocalQueue() > 0 {
		fmt.Fprintf(&b, ", #%d in queue %s", q.GetPositionInLocalQueue(), q.GetLocalQueue())
	}
	var ready, total int32
	for _, rj := range st.GetJobs() {
		ready += rj.GetReady() + rj.GetSucceeded()
		total += rj.GetActive() + rj.GetSucceeded()
	}
	if st.GetState() == kilnv1.State_STATE_RUNNING && total > 0 {
		fmt.Fprintf(&b, ", %d/%d jobs ready", ready, total)
	}
	if st.GetDeadlineTime() != nil {
		b.WriteString(", deadline " + printer.Until(now, st.GetDeadlineTime().AsTime()))
	}
	if st.GetMessage() != "" && st.GetState() != kilnv1.State_STATE_RUNNING {
		b.WriteString(": " + st.GetMessage())
	}
	return b.String()
}
