// Package trigger is `kiln schedules trigger`: a run of a schedule, now.
package trigger

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
	"github.com/kiln-ml/kiln/sdk-gen/go/kiln"
)

// Options are what `kiln schedules trigger` was asked.
type Options struct {
	Factory   *factory.Factory
	Name      string
	RequestID string
	Output    string
}

// NewCmdTrigger returns the command; runF replaces its run in tests.
func NewCmdTrigger(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "trigger NAME",
		Short: "Create a run now, outside the schedule",
		Long: `Create a run of a schedule now (as kubectl create job --from=cronjob/NAME). It is one of the
schedule's runs: it counts as active for Forbid and Replace, and the history limits keep or delete it.`,
		Args: cobra.ExactArgs(1),
		RunE: factory.RunNameE(o, &o.Name, runF, run),
	}
	cmd.Flags().StringVar(&o.RequestID, "request-id", "", "id that makes retries of this trigger safe (default: random)")
	outputs.AddFlag(cmd, &o.Output, "name: print only the run's name")
	return cmd
}

// outputs are what -o takes.
var outputs = printer.Formats{printer.FormatName}

func run(ctx context.Context, o *Options) error {
	format, c, err := outputs.Client(o.Factory, o.Output)
	if err != nil {
		return err
	}
	id := o.RequestID
	if id == "" {
		id = kiln.NewRequestID()
	}
	res, err := c.Schedules.TriggerCronTrainJob(ctx, connect.NewRequest(&kilnv1.TriggerCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name, RequestId: id}))
	if err != nil {
		return err
	}
	io, j := o.Factory.IO, res.Msg.GetTrainJob()
	if ok, err := format.Print(io.Out, j); ok {
		return err
	}
	verb := "created"
	if res.Msg.GetReplayed() {
		verb = "already created by this request"
	}
	fmt.Fprintf(io.Out, "trainjob %s/%s %s (a run of schedule %s)\n", j.GetNamespace(), j.GetName(), verb, o.Name)
	if io.IsTTY() {
		fmt.Fprintln(io.ErrOut, io.Gray(fmt.Sprintf("Follow it: kiln logs -f %s   Its state: kiln describe %s", j.GetName(), j.GetName())))
	}
	return nil
}
