// Package config is `kiln config`: which servers, tokens and namespaces the CLI uses.
package config

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// NewCmdConfig returns `kiln config`.
func NewCmdConfig(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show and change which Kiln servers, tokens and namespaces to use",
		Long: `The configuration holds contexts: an API server URL, a CA to trust, a token and a default namespace.
It lives in $KILN_CONFIG (default ~/.config/kiln/config.yaml; ` + "`make up`" + ` writes one for the local
platform to bin/platform/kiln/config.yaml). KILN_CONTEXT, KILN_SERVER, KILN_TOKEN, KILN_NAMESPACE and
KILN_CA_FILE override the current context.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newView(f), newGetContexts(f), newCurrentContext(f), newUseContext(f), newSetContext(f), newDeleteContext(f))
	return cmd
}

func load(f *factory.Factory) (*clientconfig.Config, error) { return clientconfig.Load(f.ConfigPath) }

func newView(f *factory.Factory) *cobra.Command {
	var raw bool
	cmd := &cobra.Command{
		Use:   "view",
		Short: "Print the configuration (tokens hidden unless --raw)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := load(f)
			if err != nil {
				return err
			}
			if !raw {
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
		},
	}
	cmd.Flags().BoolVar(&raw, "raw", false, "show tokens")
	return cmd
}

func newGetContexts(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts (* marks the current one)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := load(f)
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
		},
	}
}

func newCurrentContext(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "current-context",
		Short: "Print the current context's name",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := load(f)
			if err != nil {
				return err
			}
			if cfg.CurrentContext == "" {
				return fmt.Errorf("no current context in %s: set one with `kiln config use-context NAME`", f.ConfigPath)
			}
			_, err = fmt.Fprintln(f.IO.Out, cfg.CurrentContext)
			return err
		},
	}
}

func newUseContext(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make a context the current one",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			cfg, err := load(f)
			if err != nil {
				return err
			}
			if cfg.Context(args[0]) == nil {
				return fmt.Errorf("no context %q in %s: list them with `kiln config get-contexts`", args[0], f.ConfigPath)
			}
			cfg.CurrentContext = args[0]
			if err := cfg.Save(f.ConfigPath); err != nil {
				return err
			}
			_, err = fmt.Fprintf(f.IO.Out, "Switched to context %q.\n", args[0])
			return err
		},
	}
}

func newSetContext(f *factory.Factory) *cobra.Command {
	var (
		c            clientconfig.Context
		tokenFile    string
		current, use bool
	)
	cmd := &cobra.Command{
		Use:   "set-context [NAME]",
		Short: "Create or change a context",
		Long: `Create a context, or change the fields given of an existing one (--current: the current one).
The token may come from a file (--token-file, - for standard input) so it stays out of shell history.`,
		Example: `  kiln config set-context prod --server https://kiln.example.com --token-file ~/prod.token --namespace team-nlp --use
  kiln config set-context --current --namespace team-cv`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := load(f)
			if err != nil {
				return err
			}
			name := ""
			switch {
			case current && len(args) > 0:
				return factory.Usagef("give a NAME or --current, not both")
			case current:
				if name = cfg.CurrentContext; name == "" {
					return fmt.Errorf("--current: there is no current context in %s", f.ConfigPath)
				}
			case len(args) == 1:
				name = args[0]
			default:
				return factory.Usagef("name the context, or use --current")
			}
			if tokenFile != "" {
				data, err := f.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				c.Token = strings.TrimSpace(string(data))
			}
			ctx := clientconfig.Context{Name: name}
			if existing := cfg.Context(name); existing != nil {
				ctx = *existing
			}
			// Only the fields given change.
			for flag, set := range map[string]func(){
				"server":                func() { ctx.Server = c.Server },
				"token":                 func() { ctx.Token = c.Token },
				"token-file":            func() { ctx.Token = c.Token },
				"certificate-authority": func() { ctx.CertificateAuthority = c.CertificateAuthority },
				"namespace":             func() { ctx.Namespace = c.Namespace },
			} {
				if cmd.Flags().Changed(flag) {
					set()
				}
			}
			if ctx.Server == "" {
				return factory.Usagef("context %q needs a server: --server https://...", name)
			}
			if err := ctx.Validate(); err != nil {
				return factory.Usagef("--server: %v", err)
			}
			cfg.SetContext(ctx)
			if use || cfg.CurrentContext == "" {
				cfg.CurrentContext = name
			}
			if err := cfg.Save(f.ConfigPath); err != nil {
				return err
			}
			_, err = fmt.Fprintf(f.IO.Out, "Context %q set in %s.\n", name, f.ConfigPath)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&c.Server, "server", "", "API server URL, https://... (or http://... for h2c)")
	fl.StringVar(&c.Token, "token", "", "bearer token (prefer --token-file)")
	fl.StringVar(&tokenFile, "token-file", "", "file holding the token (- reads standard input)")
	fl.StringVar(&c.CertificateAuthority, "certificate-authority", "", "PEM file of the CA that signs the server's certificate")
	fl.StringVar(&c.Namespace, "namespace", "", "default namespace")
	fl.BoolVar(&current, "current", false, "change the current context")
	fl.BoolVar(&use, "use", false, "make it the current context")
	return cmd
}

func newDeleteContext(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "delete-context NAME",
		Short: "Delete a context",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			cfg, err := load(f)
			if err != nil {
				return err
			}
			kept := cfg.Contexts[:0]
			for _, c := range cfg.Contexts {
				if c.Name != args[0] {
					kept = append(kept, c)
				}
			}
			if len(kept) == len(cfg.Contexts) {
				return fmt.Errorf("no context %q in %s", args[0], f.ConfigPath)
			}
			cfg.Contexts = kept
			if cfg.CurrentContext == args[0] {
				cfg.CurrentContext = ""
			}
			if err := cfg.Save(f.ConfigPath); err != nil {
				return err
			}
			_, err = fmt.Fprintf(f.IO.Out, "Context %q deleted.\n", args[0])
			return err
		},
	}
}
