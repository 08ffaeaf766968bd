// Package list is `kiln list`: the jobs of a namespace, or of every namespace.
package list

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln list` was asked.
type Options struct {
	Factory       *factory.Factory
	AllNamespaces bool
	Selector      string
	States        []string
	Output        string
}

// pageSize is how many jobs each call fetches; `kiln list` shows them all.
const pageSize = 500

// NewCmdList returns the command; runF replaces its run in tests.
func NewCmdList(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List training jobs",
		Long: `List the training jobs of the namespace (or all namespaces with -A): NAME, RUNTIME, QUEUE,
STATE, NODES, AGE, and the PROGRESS and ETA its trainer reports ("42%", or "step 1200" for a trainer
that does not know its total; "-" until it reports). -o wide adds the LOSS, the LAST UPDATE of the
progress, REASON, STARTED, DEADLINE, TTL, SCHEDULE and CLUSTER (the worker cluster that MultiKueue
dispatched it to). On a terminal the columns are aligned under a
header; in a pipe each job is one tab-separated line with no header, never truncated. -o json prints
{"train_jobs": [...]} with the API's field names.`,
		Example: `  kiln list
  kiln list -A --state Running,Queued
  kiln list -l team=nlp -o wide
  kiln list -o json | jq -r '.train_jobs[].name'`,
		Args: cobra.NoArgs,
		RunE: factory.RunE(o, runF, run),
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "list the jobs of every namespace you may list")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector, e.g. team=nlp,stage!=dev")
	cmd.Flags().StringSliceVar(&o.States, "state", nil, "only jobs in these states: Queued, Suspended, Running, Complete, Failed")
	outputs.AddFlag(cmd, &o.Output, "")
	return cmd
}

// outputs are what -o takes.
var outputs = printer.Formats{printer.FormatWide, printer.FormatJSON, printer.FormatYAML}

func run(ctx context.Context, o *Options) error {
	format, err := outputs.Parse(o.Output)
	if err != nil {
		return err
	}
	var states []kilnv1.State
	for _, s := range o.States {
		st, err := printer.ParseState(strings.TrimSpace(s))
		if err != nil {
			return factory.Usagef("--state: %v", err)
		}
		states = append(states, st)
	}
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	req := &kilnv1.ListTrainJobsRequest{LabelSelector: o.Selector, States: states, PageSize: pageSize}
	if o.AllNamespaces {
		req.AllNamespaces = true
	} else {
		req.Namespace = c.Namespace
	}
	all := &kilnv1.ListTrainJobsResponse{}
	for {
		res, err := c.Jobs.ListTrainJobs(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		all.TrainJobs = append(all.TrainJobs, res.Msg.GetTrainJobs()...)
		if req.PageToken = res.Msg.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	io := o.Factory.IO
	if ok, err := format.Print(io.Out, all); ok {
		return err
	}
	if len(all.TrainJobs) == 0 {
		if io.IsTTY() {
			where := "in namespace " + c.Namespace
			if o.AllNamespaces {
				where = "in any namespace you may list"
			}
			fmt.Fprintf(io.ErrOut, "No training jobs %s.\n", where)
		}
		return nil
	}
	return printer.JobTable(io, o.Factory.Clock.Now(), all.TrainJobs, o.AllNamespaces, format == printer.FormatWide).Render(io.Out)
}
