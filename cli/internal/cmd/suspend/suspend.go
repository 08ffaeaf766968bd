// Package suspend is `kiln suspend`.
package suspend

import (
	"context"

	"github.com/spf13/cobra"

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
	return jobs.SetSuspended(ctx, c.Jobs, o.Factory.IO, o.Factory.Clock.Now, c.Namespace, o.Name, true)
}
