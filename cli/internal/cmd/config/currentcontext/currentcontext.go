// Package currentcontext is `kiln config current-context`: the current context's name.
package currentcontext

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// Options are what `kiln config current-context` was asked.
type Options struct {
	Factory *factory.Factory
}

// NewCmdCurrentContext returns the command; runF replaces its run in tests.
func NewCmdCurrentContext(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	return &cobra.Command{
		Use:   "current-context",
		Short: "Print the current context's name",
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
	if cfg.CurrentContext == "" {
		return fmt.Errorf("no current context in %s: set one with `kiln config use-context NAME`", f.ConfigPath)
	}
	_, err = fmt.Fprintln(f.IO.Out, cfg.CurrentContext)
	return err
}
