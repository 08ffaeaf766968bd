// Package queues is `kiln queues list`.
package queues

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

// NewCmdQueues returns `kiln queues`.
func NewCmdQueues(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "queues", Short: "List the Kueue queues jobs wait in", Args: cobra.NoArgs}
	cmd.AddCommand(NewCmdList(f, nil))
	return cmd
}

// Options are what `kiln queues list` was asked.
type Options struct {
	Factory       *factory.Factory
	AllNamespaces bool
	Output        string
}

// NewCmdList returns `kiln queues list`; runF replaces its run in tests.
func NewCmdList(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List LocalQueues: pending and admitted jobs, quota used of nominal",
		Args:  cobra.NoArgs,
		RunE:  factory.RunE(o, runF, run),
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "every namespace you may list")
	outputs.AddFlag(cmd, &o.Output, "")
	return cmd
}

// outputs are what -o takes.
var outputs = printer.Formats{printer.FormatJSON, printer.FormatYAML}

func run(ctx context.Context, o *Options) error {
	format, c, err := outputs.Client(o.Factory, o.Output)
	if err != nil {
		return err
	}
	req := &kilnv1.ListQueuesRequest{AllNamespaces: o.AllNamespaces}
	if !o.AllNamespaces {
		req.Namespace = c.Namespace
	}
	res, err := c.Queues.ListQueues(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	io := o.Factory.IO
	if ok, err := format.Print(io.Out, res.Msg); ok {
		return err
	}
	header := []string{"NAME", "CLUSTERQUEUE", "PENDING", "ADMITTED", "QUOTA (USED/NOMINAL)"}
	if o.AllNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	t := printer.NewTable(io, header...)
	for _, q := range res.Msg.GetQueues() {
		cells := []string{q.GetName(), q.GetClusterQueue(), fmt.Sprint(q.GetPending()), fmt.Sprint(q.GetAdmitted()), quota(q)}
		if o.AllNamespaces {
			cells = append([]string{q.GetNamespace()}, cells...)
		}
		if !q.GetActive() {
			cells[len(cells)-1] = "inactive: " + q.GetMessage()
		}
		t.Row(cells...)
	}
	return t.Render(io.Out)
}

func quota(q *kilnv1.Queue) string {
	var out []string
	for _, fq := range q.GetQuota() {
		s := fmt.Sprintf("%s/%s %s", fq.GetFlavor(), fq.GetResource(), fq.GetUsed())
		if fq.GetNominal() != "" {
			s += "/" + fq.GetNominal()
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}
