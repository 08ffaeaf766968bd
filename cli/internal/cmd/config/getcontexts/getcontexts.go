// Package getcontexts is `kiln config get-contexts`: the contexts, * marking the current one.
package getcontexts

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln config get-contexts` was asked.
type Options struct {
	Factory *factory.Factory
}

// NewCmdGetContexts returns the command; runF replaces its run in tests.
func NewCmdGetContexts(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	return &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts (* marks the current one)",
		Args:  cobra.NoArgs,
		RunE:  factory.RunE(o, runF, run),
	}
}

func run(_ context.Context, o *Options) error {
	f := o.Factory
	cfg, err := clientconfig.Load(f.ConfigPath)
	if err != nil {
		return err
	}
	t := printer.NewTable(f.IO, "CURRENT", "NAME", "SERVER", "NAMESPACE")
	for _, c := range cfg.Contexts {
		cur := ""
		if c.Name == cfg.CurrentContext {
			cur = "*"
		}
		t.Row(cur, c.Name, c.Server, c.Namespace)
	}
	return t.Render(f.IO.Out)
}
