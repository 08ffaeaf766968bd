package jobs

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

// LogOptions say which logs to stream.
type LogOptions struct {
	Step       string
	Container  string
	Follow     bool
	Tail       *int64
	Since      time.Duration
	Timestamps bool
	// Prefix puts the step before each line (several steps interleave).
	Prefix bool
	// Attempt and Previous ask for an earlier attempt's kept logs.
	Attempt  *int32
	Previous bool
}

// StreamLogs writes a job's log lines to io.Out until the stream ends.
func StreamLogs(ctx context.Context, c kilnv1connect.TrainJobServiceClient, io *iostreams.IOStreams, namespace, name string, o LogOptions) error {
	req := &kilnv1.StreamLogsRequest{Namespace: namespace, Name: name, Step: o.Step, Container: o.Container, Follow: o.Follow, TailLines: o.Tail, Timestamps: o.Timestamps,
		Attempt: o.Attempt, Previous: o.Previous}
	if o.Since > 0 {
		s := int64(o.Since.Seconds())
		req.SinceSeconds = &s
	}
	stream, err := c.StreamLogs(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
		for _, l := range stream.Msg().GetLines() {
			prefix := ""
			switch {
			// A later attempt's lines (after a restart), and an earlier attempt's kept
			// lines, say which attempt printed them.
			case o.Prefix && (l.GetAttempt() > 0 || o.Attempt != nil || o.Previous):
				prefix = io.Gray(fmt.Sprintf("[%s attempt %d] ", l.GetStep(), l.GetAttempt()))
			case o.Prefix:
				prefix = io.Gray(fmt.Sprintf("[%s] ", l.GetStep()))
			}
			ts := ""
			if o.Timestamps && l.GetTime() != nil {
				ts = l.GetTime().AsTime().UTC().Format(time.RFC3339Nano) + " "
			}
			if _, err := fmt.Fprintf(io.Out, "%s%s%s\n", prefix, ts, l.GetText()); err != nil {
				return err
			}
		}
	}
	return stream.Err()
}
