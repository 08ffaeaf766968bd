// Package list is `kiln runtimes list`: the cluster's runtimes and the namespace's.
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

// Options are what `kiln runtimes list` was asked.
type Options struct {
	Factory *factory.Factory
	Output  string
}

// NewCmdList returns the command; runF replaces its run in tests.
func NewCmdList(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the cluster's runtimes and the namespace's",
		Args:  cobra.NoArgs,
		RunE:  factory.RunE(o, runF, run),
	}
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
	res, err := c.Runtimes.ListRuntimes(ctx, connect.NewRequest(&kilnv1.ListRuntimesRequest{Namespace: c.Namespace}))
	if err != nil {
		return err
	}
	io := o.Factory.IO
	if ok, err := format.Print(io.Out, res.Msg); ok {
		return err
	}
	t := printer.NewTable(io, "NAME", "KIND", "FRAMEWORK", "NODES", "DEVICES/NODE", "TOPOLOGY", "DEADLINE", "TTL")
	for _, rt := range res.Msg.GetRuntimes() {
		name := rt.GetName()
		if rt.GetDeprecated() {
			name += " (deprecated)"
		}
		t.Row(name, printer.RuntimeKind(rt), printer.Dash(rt.GetFramework()), fmt.Sprint(rt.GetNodes()), printer.RuntimeDevices(rt), topology(rt.GetTopology()), printer.RuntimeDeadline(rt), printer.RuntimeTTL(rt))
	}
	return t.Render(io.Out)
}

// topology says which topology domain a runtime's nodes ask Kueue for: "rack", or
// "rack (preferred)"; "-" for none.
func topology(t *kilnv1.TopologyRequest) string {
	switch {
	case t == nil:
		return "-"
	case t.GetPreferred():
		return t.GetLevel() + " (preferred)"
	default:
		return t.GetLevel()
	}
}
