// Package usecontext is `kiln config use-context`: make a context the current one.
package usecontext

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// Options are what `kiln config use-context` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
}

// NewCmdUseContext returns the command; runF replaces its run in tests.
func NewCmdUseContext(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	return &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make a context the current one",
		Args:  cobra.ExactArgs(1),
		RunE:  factory.RunNameE(o, &o.Name, runF, run),
	}
}

func run(_ context.Context, o *Options) error {
	f := o.Factory
	cfg, err := clientconfig.Load(f.ConfigPath)
	if err != nil {
		return err
	}
	if cfg.Context(o.Name) == nil {
		return fmt.Errorf("no context %q in %s: list them with `kiln config get-contexts`", o.Name, f.ConfigPath)
	}
	cfg.CurrentContext = o.Name
	if err := cfg.Save(f.ConfigPath); err != nil {
		return err
	}
	_, err = fmt.Fprintf(f.IO.Out, "Switched to context %q.\n", o.Name)
	return err
}
