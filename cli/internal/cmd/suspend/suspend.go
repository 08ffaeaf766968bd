// Package suspend is `kiln suspend` and `kiln resume`: one request each way, one report.
package suspend

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/jobs"
)

// Options are what `kiln suspend` or `kiln resume` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
	// Suspend is true for `kiln suspend`, false for `kiln resume`.
	Suspend bool
}

// NewCmdSuspend returns `kiln suspend`; runF replaces its run in tests.
func NewCmdSuspend(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	return newCmd(f, runF, true, &cobra.Command{
		Use:   "suspend NAME",
		Short: "Suspend a training job",
		Long: `Suspend a training job: its pods stop and its deadline clock stops. A job queued in Kueue is
deactivated in Kueue, which releases its quota. ` + "`kiln resume`" + ` undoes it.`,
	})
}

// NewCmdResume returns `kiln resume`; runF replaces its run in tests.
func NewCmdResume(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	return newCmd(f, runF, false, &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a training job",
		Long:  `Resume a suspended training job. A job queued in Kueue goes back to its queue.`,
	})
}

func newCmd(f *factory.Factory, runF func(context.Context, *Options) error, suspend bool, cmd *cobra.Command) *cobra.Command {
	o := &Options{Factory: f, Suspend: suspend}
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = factory.RunNameE(o, &o.Name, runF, run)
	return cmd
}

// run makes the request and says so: "trainjob NS/NAME suspended" (or resumed) on standard
// output and, on a terminal, the job's summary on standard error.
func run(ctx context.Context, o *Options) error {
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	var j *kilnv1.TrainJob
	verb := "suspended"
	if o.Suspend {
		res, err := c.Jobs.SuspendTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
		if err != nil {
			return err
		}
		j = res.Msg.GetTrainJob()
	} else {
		res, err := c.Jobs.ResumeTrainJob(ctx, connect.NewRequest(&kilnv1.ResumeTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
		if err != nil {
			return err
		}
		j, verb = res.Msg.GetTrainJob(), "resumed"
	}
	io := o.Factory.IO
	fmt.Fprintf(io.Out, "trainjob %s/%s %s\n", j.GetNamespace(), j.GetName(), verb)
	if io.IsTTY() {
		fmt.Fprintln(io.ErrOut, io.Gray(jobs.Summary(io, j, o.Factory.Clock.Now())))
	}
	return nil
}
