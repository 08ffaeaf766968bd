// Package suspend is `kiln suspend`.
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

// Options are what `kiln suspend` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
}

// NewCmdSuspend returns the command; runF replaces its run in tests.
func NewCmdSuspend(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	return &cobra.Command{
		Use:   "suspend NAME",
		Short: "Suspend a training job",
		Long: `Suspend a training job: its pods stop and its deadline clock stops. A job queued in Kueue is
deactivated in Kueue, which releases its quota. ` + "`kiln resume`" + ` undoes it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return run(cmd.Context(), o)
		},
	}
}

func run(ctx context.Context, o *Options) error {
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	res, err := c.Jobs.SuspendTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
	if err != nil {
		return err
	}
	j := res.Msg.GetTrainJob()
	fmt.Fprintf(o.Factory.IO.Out, "trainjob %s/%s suspended\n", j.GetNamespace(), j.GetName())
	if o.Factory.IO.IsTTY() {
		fmt.Fprintln(o.Factory.IO.ErrOut, o.Factory.IO.Gray(jobs.Summary(o.Factory.IO, j, o.Factory.Now())))
	}
	return nil
}
