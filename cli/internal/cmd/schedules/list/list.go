// Package list is `kiln schedules list`: the schedules of a namespace, or of every namespace.
package list

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln schedules list` was asked.
type Options struct {
	Factory       *factory.Factory
	AllNamespaces bool
	Selector      string
	Output        string
}

// NewCmdList returns the command; runF replaces its run in tests.
func NewCmdList(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List schedules",
		Long: `List the schedules of the namespace (or all namespaces with -A): NAME, SCHEDULE, TIMEZONE,
SUSPEND, ACTIVE (runs not finished), LAST SCHEDULE, NEXT, AGE.`,
		Args: cobra.NoArgs,
		RunE: factory.RunE(o, runF, run),
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "list the schedules of every namespace you may list")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector, e.g. team=nlp")
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
	req := &kilnv1.ListCronTrainJobsRequest{LabelSelector: o.Selector, AllNamespaces: o.AllNamespaces}
	if !o.AllNamespaces {
		req.Namespace = c.Namespace
	}
	res, err := c.Schedules.ListCronTrainJobs(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	io := o.Factory.IO
	if ok, err := format.Print(io.Out, res.Msg); ok {
		return err
	}
	if len(res.Msg.GetCronTrainJobs()) == 0 {
		if io.IsTTY() {
			fmt.Fprintf(io.ErrOut, "No schedules in %s. Create one: kiln schedules create NAME --schedule CRON --runtime RUNTIME -- COMMAND\n",
				map[bool]string{true: "any namespace you may list", false: "namespace " + c.Namespace}[o.AllNamespaces])
		}
		return nil
	}
	return printer.ScheduleTable(io, o.Factory.Clock.Now(), res.Msg.GetCronTrainJobs(), o.AllNamespaces, format == printer.FormatWide).Render(io.Out)
}
