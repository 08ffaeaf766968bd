// Package wait is `kiln wait`: block until a job reaches a state; the exit code says how it
// ended.
package wait

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/jobs"
	"github.com/kiln-ml/kiln/cli/internal/printer"
	"github.com/kiln-ml/kiln/sdk-gen/go/kiln"
)

// Options are what `kiln wait` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
	For     string
	Timeout time.Duration
}

// NewCmdWait returns the command; runF replaces its run in tests.
func NewCmdWait(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "wait NAME --for STATE",
		Short: "Wait until a training job reaches a state",
		Long: `Wait until a job reaches a state (Complete, Failed, Running, Queued or Suspended), showing its
progress on standard error: on a terminal one line redrawn in place, with a bar once its trainer
reports (percent, step, loss, ETA); in a pipe a plain line of the trainer's progress when the state
changes, or the percent does (at most every 10 s).

Exit codes: 0 the job reached the state; 3 it failed instead; 4 --timeout passed; 1 it can no longer
reach the state (it completed, or was deleted).`,
		Example: `  kiln wait mnist --for Complete --timeout 1h && echo trained
  kiln wait mnist --for Running`,
		Args: cobra.ExactArgs(1),
		RunE: factory.RunNameE(o, &o.Name, runF, run),
	}
	cmd.Flags().StringVar(&o.For, "for", "Complete", "state to wait for: Complete, Failed, Running, Queued or Suspended")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "give up after this long (exit 4); 0 waits forever")
	return cmd
}

func run(ctx context.Context, o *Options) error {
	want, err := printer.ParseState(o.For)
	if err != nil {
		return factory.Usagef("--for: %v", err)
	}
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	ctx, cancel := o.Factory.WithTimeout(ctx, o.Timeout)
	defer cancel()
	io := o.Factory.IO
	progress := &jobs.Progress{IO: io, Now: o.Factory.Clock.Now}
	j, err := c.WatchJob(ctx, c.Namespace, o.Name, func(j *kilnv1.TrainJob) bool {
		progress.Show(j)
		return j.GetStatus().GetState() == want || jobs.Finished(j)
	})
	progress.Done()
	var gone *kiln.JobGoneError
	switch {
	case factory.TimedOut(ctx, err) || errors.Is(err, context.DeadlineExceeded) || connect.CodeOf(err) == connect.CodeDeadlineExceeded:
		return &factory.ExitErr{Code: factory.ExitTimeout, Err: fmt.Errorf("timed out after %s waiting for %s to be %s", o.Timeout, o.Name, printer.StateName(want))}
	case errors.As(err, &gone) && gone.Deleted:
		return fmt.Errorf("trainjob %s/%s was deleted before it was %s", c.Namespace, o.Name, printer.StateName(want))
	case err != nil:
		return err
	}
	got := j.GetStatus().GetState()
	line := fmt.Sprintf("trainjob %s/%s %s", j.GetNamespace(), j.GetName(), printer.StateName(got))
	if r := j.GetStatus().GetReason(); r != "" {
		line += " (" + r + ")"
	}
	switch got {
	case want:
		fmt.Fprintln(io.Out, line)
		return nil
	case kilnv1.State_STATE_FAILED:
		fmt.Fprintf(io.ErrOut, "%s: %s\n", line, j.GetStatus().GetMessage())
		return &factory.ExitErr{Code: factory.ExitFailed}
	}
	return fmt.Errorf("%s: it will never be %s", line, printer.StateName(want))
}
