// Package suspend is `kiln schedules suspend` and `kiln schedules resume`: one request each
// way, one report.
package suspend

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln schedules suspend` or `kiln schedules resume` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
	// Suspend is true for suspend, false for resume.
	Suspend bool
}

// NewCmdSuspend returns `kiln schedules suspend`; runF replaces its run in tests.
func NewCmdSuspend(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	return newCmd(f, runF, true, &cobra.Command{
		Use:   "suspend NAME",
		Short: "Suspend a schedule: no new runs",
		Long:  "Suspend a schedule: it creates no runs until it is resumed; runs already created go on.",
	})
}

// NewCmdResume returns `kiln schedules resume`; runF replaces its run in tests.
func NewCmdResume(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	return newCmd(f, runF, false, &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a schedule",
		Long: `Resume a suspended schedule. A time missed while it was suspended runs once, now, if it is
within the schedule's starting deadline (as for a CronJob).`,
	})
}

func newCmd(f *factory.Factory, runF func(context.Context, *Options) error, suspend bool, cmd *cobra.Command) *cobra.Command {
	o := &Options{Factory: f, Suspend: suspend}
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = factory.RunNameE(o, &o.Name, runF, run)
	return cmd
}

// run makes the request and says so, and on a terminal when the schedule runs next.
func run(ctx context.Context, o *Options) error {
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	var cj *kilnv1.CronTrainJob
	verb := "suspended"
	if o.Suspend {
		res, err := c.Schedules.SuspendCronTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
		if err != nil {
			return err
		}
		cj = res.Msg.GetCronTrainJob()
	} else {
		res, err := c.Schedules.ResumeCronTrainJob(ctx, connect.NewRequest(&kilnv1.ResumeCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
		if err != nil {
			return err
		}
		cj, verb = res.Msg.GetCronTrainJob(), "resumed"
	}
	io := o.Factory.IO
	fmt.Fprintf(io.Out, "crontrainjob %s/%s %s\n", cj.GetNamespace(), cj.GetName(), verb)
	if io.IsTTY() {
		fmt.Fprintln(io.ErrOut, io.Gray(printer.NextRun(cj, o.Factory.Clock.Now())))
	}
	return nil
}
