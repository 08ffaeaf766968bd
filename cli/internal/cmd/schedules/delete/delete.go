// Package delete is `kiln schedules delete`: a schedule and, unless told otherwise, its runs.
package delete

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// Options are what `kiln schedules delete` was asked.
type Options struct {
	Factory  *factory.Factory
	Name     string
	KeepRuns bool
}

// NewCmdDelete returns the command; runF replaces its run in tests.
func NewCmdDelete(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule and its runs",
		Long:  "Delete a schedule and, unless --keep-runs, its runs.",
		Args:  cobra.ExactArgs(1),
		RunE:  factory.RunNameE(o, &o.Name, runF, run),
	}
	cmd.Flags().BoolVar(&o.KeepRuns, "keep-runs", false, "keep the runs (they lose their owner)")
	return cmd
}

func run(ctx context.Context, o *Options) error {
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	if _, err := c.Schedules.DeleteCronTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name, KeepRuns: o.KeepRuns})); err != nil {
		return err
	}
	what := "and its runs "
	if o.KeepRuns {
		what = "(its runs kept) "
	}
	_, err = fmt.Fprintf(o.Factory.IO.Out, "crontrainjob %s/%s %sdeleted\n", c.Namespace, o.Name, what)
	return err
}
