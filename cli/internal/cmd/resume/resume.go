// Package resume is `kiln resume`.
package resume

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/jobs"
)

// Options are what `kiln resume` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
}

// NewCmdResume returns the command; runF replaces its run in tests.
func NewCmdResume(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	return &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a training job",
		Long:  `Resume a suspended training job. A job queued in Kueue goes back to its queue.`,
		Args:  cobra.ExactArgs(1),
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
	return jobs.SetSuspended(ctx, c.Jobs, o.Factory.IO, o.Factory.Clock.Now, c.Namespace, o.Name, false)
}
