// Package runs is `kiln schedules runs`: the TrainJobs a schedule created, newest first.
package runs

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln schedules runs` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
	Output  string
}

// NewCmdRuns returns the command; runF replaces its run in tests.
func NewCmdRuns(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "runs NAME",
		Short: "List a schedule's runs, newest first",
		Args:  cobra.ExactArgs(1),
		RunE:  factory.RunNameE(o, &o.Name, runF, run),
	}
	outputs.AddFlag(cmd, &o.Output, "")
	return cmd
}

// outputs are what -o takes.
var outputs = printer.Formats{printer.FormatWide, printer.FormatJSON, printer.FormatYAML}

func run(ctx context.Context, o *Options) error {
	format, c, err := outputs.Client(o.Factory, o.Output)
	if err != nil {
		return err
	}
	res, err := c.Schedules.ListCronTrainJobRuns(ctx, connect.NewRequest(&kilnv1.ListCronTrainJobRunsRequest{Namespace: c.Namespace, Name: o.Name}))
	if err != nil {
		return err
	}
	io := o.Factory.IO
	if ok, err := format.Print(io.Out, res.Msg); ok {
		return err
	}
	if len(res.Msg.GetTrainJobs()) == 0 {
		if io.IsTTY() {
			fmt.Fprintf(io.ErrOut, "Schedule %s has no runs.\n", o.Name)
		}
		return nil
	}
	return printer.JobTable(io, o.Factory.Clock.Now(), res.Msg.GetTrainJobs(), false, format == printer.FormatWide).Render(io.Out)
}
