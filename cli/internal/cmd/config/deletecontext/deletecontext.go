// Package deletecontext is `kiln config delete-context`.
package deletecontext

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// Options are what `kiln config delete-context` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
}

// NewCmdDeleteContext returns the command; runF replaces its run in tests.
func NewCmdDeleteContext(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	return &cobra.Command{
		Use:   "delete-context NAME",
		Short: "Delete a context",
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
	kept := cfg.Contexts[:0]
	for _, c := range cfg.Contexts {
		if c.Name != o.Name {
			kept = append(kept, c)
		}
	}
	if len(kept) == len(cfg.Contexts) {
		return fmt.Errorf("no context %q in %s", o.Name, f.ConfigPath)
	}
	cfg.Contexts = kept
	if cfg.CurrentContext == o.Name {
		cfg.CurrentContext = ""
	}
	if err := cfg.Save(f.ConfigPath); err != nil {
		return err
	}
	_, err = fmt.Fprintf(f.IO.Out, "Context %q deleted.\n", o.Name)
	return err
}
