// Package runtimes is `kiln runtimes list|get`.
package runtimes

import (
	"context"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// NewCmdRuntimes returns `kiln runtimes`.
func NewCmdRuntimes(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runtimes",
		Short: "List and show the runtimes jobs run on",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(NewCmdList(f, nil), NewCmdGet(f, nil))
	return cmd
}

// ListOptions are what `kiln runtimes list` was asked.
type ListOptions struct {
	Factory *factory.Factory
	Output  string
}

// NewCmdList returns `kiln runtimes list`; runF replaces its run in tests.
func NewCmdList(f *factory.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	o := &ListOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the cluster's runtimes and the namespace's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runList(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "json or yaml")
	return cmd
}

func runList(ctx context.Context, o *ListOptions) error {
	if o.Output != "" && o.Output != "json" && o.Output != "yaml" {
		return factory.Usagef("--output %q: want json or yaml", o.Output)
	}
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	res, err := c.Runtimes.ListRuntimes(ctx, connect.NewRequest(&kilnv1.ListRuntimesRequest{Namespace: c.Namespace}))
	if err != nil {
		return err
	}
	io := o.Factory.IO
	switch o.Output {
	case "json":
		return printer.JSON(io.Out, res.Msg)
	case "yaml":
		return printer.YAML(io.Out, res.Msg)
	}
	t := printer.NewTable(io, "NAME", "KIND", "FRAMEWORK", "NODES", "DEVICES/NODE", "DEADLINE", "TTL")
	for _, rt := range res.Msg.GetRuntimes() {
		name := rt.GetName()
		if rt.GetDeprecated() {
			name += " (deprecated)"
		}
		t.Row(name, kind(rt), printer.Dash(rt.GetFramework()), fmt.Sprint(rt.GetNodes()), devices(rt), deadline(rt), ttl(rt))
	}
	return t.Render(io.Out)
}

// GetOptions are what `kiln runtimes get` was asked.
type GetOptions struct {
	Factory    *factory.Factory
	Name       string
	Namespaced bool
	Output     string
}

// NewCmdGet returns `kiln runtimes get`; runF replaces its run in tests.
func NewCmdGet(f *factory.Factory, runF func(context.Context, *GetOptions) error) *cobra.Command {
	o := &GetOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a runtime: framework, image, nodes, devices, run policy",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runGet(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Namespaced, "namespaced", false, "a TrainingRuntime of the namespace, not a ClusterTrainingRuntime")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "json or yaml")
	return cmd
}

func runGet(ctx context.Context, o *GetOptions) error {
	if o.Output != "" && o.Output != "json" && o.Output != "yaml" {
		return factory.Usagef("--output %q: want json or yaml", o.Output)
	}
	c, err := o.Factory.Clients()
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
	switch o.Output {
	case "json":
		return printer.JSON(io.Out, rt)
	case "yaml":
		return printer.YAML(io.Out, rt)
	}
	var b strings.Builder
	field := func(k, v string) { fmt.Fprintf(&b, "%-16s%s\n", k+":", v) }
	field("Name", rt.GetName())
	field("Kind", kind(rt))
	field("Framework", printer.Dash(rt.GetFramework()))
	field("Image", printer.Dash(rt.GetImage()))
	field("Nodes", fmt.Sprint(rt.GetNodes()))
	if rt.GetProcsPerNode() > 0 {
		field("Procs per node", fmt.Sprint(rt.GetProcsPerNode()))
	}
	field("Devices/node", devices(rt))
	field("Steps", strings.Join(rt.GetSteps(), ", "))
	field("Deadline", deadline(rt))
	field("TTL", ttl(rt))
	if rt.GetDeprecated() {
		field("Deprecated", "yes: pick another runtime for new jobs")
	}
	_, err = fmt.Fprint(io.Out, b.String())
	return err
}

func kind(rt *kilnv1.Runtime) string {
	if rt.GetKind() == kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED {
		return "TrainingRuntime"
	}
	return "ClusterTrainingRuntime"
}

func devices(rt *kilnv1.Runtime) string {
	var out []string
	for _, d := range rt.GetDevicesPerNode() {
		out = append(out, fmt.Sprintf("%s=%d", d.GetResource(), d.GetCount()))
	}
	return printer.Dash(strings.Join(out, " "))
}

// deadline and ttl are a runtime's run policy, "-" where it sets none.
func deadline(rt *kilnv1.Runtime) string {
	if rt.GetRunPolicy() == nil {
		return "-"
	}
	return seconds(rt.GetRunPolicy().ActiveDeadlineSeconds)
}

func ttl(rt *kilnv1.Runtime) string {
	if rt.GetRunPolicy() == nil {
		return "-"
	}
	return seconds32(rt.GetRunPolicy().TtlSecondsAfterFinished)
}

func seconds(s *int64) string {
	if s == nil {
		return "-"
	}
	return printer.Duration(time.Duration(*s) * time.Second)
}

func seconds32(s *int32) string {
	if s == nil {
		return "-"
	}
	v := int64(*s)
	return seconds(&v)
}
