// Package view is `kiln config view`: the configuration, tokens hidden unless --raw.
package view

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// Options are what `kiln config view` was asked.
type Options struct {
	Factory *factory.Factory
	Raw     bool
}

// NewCmdView returns the command; runF replaces its run in tests.
func NewCmdView(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "view",
		Short: "Print the configuration (tokens hidden unless --raw)",
		Args:  cobra.NoArgs,
		RunE:  factory.RunE(o, runF, run),
	}
	cmd.Flags().BoolVar(&o.Raw, "raw", false, "show tokens")
	return cmd
}

func run(_ context.Context, o *Options) error {
	f := o.Factory
	cfg, err := clientconfig.Load(f.ConfigPath)
	if err != nil {
		return err
	}
	if !o.Raw {
		for i := range cfg.Contexts {
			if cfg.Contexts[i].Token != "" {
				cfg.Contexts[i].Token = "REDACTED"
			}
		}
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "%s\n", f.IO.Gray("# "+f.ConfigPath))
	_, err = f.IO.Out.Write(data)
	return err
}
