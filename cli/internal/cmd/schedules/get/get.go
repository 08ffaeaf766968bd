// Package get is `kiln schedules get`: one schedule, as a table row, JSON or YAML.
package get

import (
	"context"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln schedules get` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
	Output  string
}

// NewCmdGet returns the command; runF replaces its run in tests.
func NewCmdGet(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show one schedule",
		Long:  "Show one schedule as a table row, or all of it with -o json or -o yaml.",
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
	res, err := c.Schedules.GetCronTrainJob(ctx, connect.NewRequest(&kilnv1.GetCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
	if err != nil {
		return err
	}
	io, cj := o.Factory.IO, res.Msg.GetCronTrainJob()
	if ok, err := format.Print(io.Out, cj); ok {
		return err
	}
	return printer.ScheduleTable(io, o.Factory.Clock.Now(), []*kilnv1.CronTrainJob{cj}, false, format == printer.FormatWide).Render(io.Out)
}
