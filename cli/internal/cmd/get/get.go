// Package get is `kiln get`: one job, as a table row, JSON or YAML.
package get

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln get` was asked.
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
		Short: "Show a training job",
		Long: `Show a training job: a table row with the columns of ` + "`kiln list`" + ` (-o wide: with its loss and
when its trainer last reported), or with -o json/yaml the whole kiln.v1.TrainJob (spec, state, timers,
steps, conditions, progress) with the API's field names; -o manifest prints the Kubernetes TrainJob.`,
		Example: `  kiln get mnist
  kiln get mnist -o json | jq .status.state
  kiln get mnist -o manifest > mnist.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: factory.RunNameE(o, &o.Name, runF, run),
	}
	outputs.AddFlag(cmd, &o.Output, "")
	return cmd
}

// outputs are what -o takes.
var outputs = printer.Formats{printer.FormatWide, printer.FormatJSON, printer.FormatYAML, printer.FormatManifest}

func run(ctx context.Context, o *Options) error {
	format, c, err := outputs.Client(o.Factory, o.Output)
	if err != nil {
		return err
	}
	res, err := c.Jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: c.Namespace, Name: o.Name, IncludeManifest: format == printer.FormatManifest}))
	if err != nil {
		return err
	}
	io, j := o.Factory.IO, res.Msg.GetTrainJob()
	if ok, err := format.Print(io.Out, j); ok {
		return err
	}
	if format == printer.FormatManifest {
		_, err := fmt.Fprint(io.Out, res.Msg.GetManifest())
		return err
	}
	return printer.JobTable(io, o.Factory.Clock.Now(), []*kilnv1.TrainJob{j}, false, format == printer.FormatWide).Render(io.Out)
}
