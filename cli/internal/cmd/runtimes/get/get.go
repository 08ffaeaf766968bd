// Package get is `kiln runtimes get`: one runtime, its framework, image, nodes, devices
// and run policy.
package get

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

// Options are what `kiln runtimes get` was asked.
type Options struct {
	Factory    *factory.Factory
	Name       string
	Namespaced bool
	Output     string
}

// NewCmdGet returns the command; runF replaces its run in tests.
func NewCmdGet(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a runtime: framework, image, nodes, devices, run policy",
		Args:  cobra.ExactArgs(1),
		RunE:  factory.RunNameE(o, &o.Name, runF, run),
	}
	cmd.Flags().BoolVar(&o.Namespaced, "namespaced", false, "a TrainingRuntime of the namespace, not a ClusterTrainingRuntime")
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
	req := &kilnv1.GetRuntimeRequest{Name: o.Name}
	if o.Namespaced {
		req.Kind, req.Namespace = kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED, c.Namespace
	}
	res, err := c.Runtimes.GetRuntime(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	io, rt := o.Factory.IO, res.Msg.GetRuntime()
	if ok, err := format.Print(io.Out, rt); ok {
		return err
	}
	var b strings.Builder
	field := func(k, v string) { fmt.Fprintf(&b, "%-16s%s\n", k+":", v) }
	field("Name", rt.GetName())
	field("Kind", printer.RuntimeKind(rt))
	field("Framework", printer.Dash(rt.GetFramework()))
	field("Image", printer.Dash(rt.GetImage()))
	field("Nodes", fmt.Sprint(rt.GetNodes()))
	if rt.GetProcsPerNode() > 0 {
		field("Procs per node", fmt.Sprint(rt.GetProcsPerNode()))
	}
	field("Devices/node", printer.RuntimeDevices(rt))
	field("Steps", strings.Join(rt.GetSteps(), ", "))
	if t := rt.GetTopology(); t != nil {
		mode := "required: jobs wait until one has room"
		if t.GetPreferred() {
			mode = "preferred: Kueue spreads them when none has room"
		}
		field("Topology", fmt.Sprintf("all training nodes in one %s (node label %s), %s; a job overrides it with --topology", t.GetLevel(), t.GetNodeLabel(), mode))
	}
	field("Deadline", printer.RuntimeDeadline(rt))
	field("TTL", printer.RuntimeTTL(rt))
	if rt.GetDeprecated() {
		field("Deprecated", "yes: pick another runtime for new jobs")
	}
	_, err = fmt.Fprint(io.Out, b.String())
	return err
}
