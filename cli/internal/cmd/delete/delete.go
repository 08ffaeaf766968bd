// Package delete is `kiln delete`.
package delete

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// Options are what `kiln delete` was asked.
type Options struct {
	Factory *factory.Factory
	Names   []string
}

// NewCmdDelete returns the command; runF replaces its run in tests.
func NewCmdDelete(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	return &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete training jobs and everything they own",
		Long:  "Delete training jobs. Their pods stop with their grace period; everything they own goes with them.",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Names = args
			return factory.Run(cmd.Context(), o, runF, run)
		},
	}
}

func run(ctx context.Context, o *Options) error {
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	for _, name := range o.Names {
		if _, err := c.Jobs.DeleteTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteTrainJobRequest{Namespace: c.Namespace, Name: name})); err != nil {
			return err
		}
		fmt.Fprintf(o.Factory.IO.Out, "trainjob %s/%s deleted\n", c.Namespace, name)
	}
	return nil
}
