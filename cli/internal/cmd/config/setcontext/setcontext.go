// Package setcontext is `kiln config set-context`: create a context, or change the fields
// given of one.
package setcontext

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// Options are what `kiln config set-context` was asked.
type Options struct {
	Factory *factory.Factory
	// Name is the context's, or empty with Current.
	Name string
	// Context holds the fields the flags give; TokenFile is --token-file.
	Context   clientconfig.Context
	TokenFile string
	// Current changes the current context; Use makes this one current.
	Current, Use bool
	// changed are the flags given: only the fields they set change.
	changed map[string]bool
}

// NewCmdSetContext returns the command; runF replaces its run in tests.
func NewCmdSetContext(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "set-context [NAME]",
		Short: "Create or change a context",
		Long: `Create a context, or change the fields given of an existing one (--current: the current one).
The token may come from a file (--token-file), so it stays out of shell history: the file is read again for
every call, so a rotated token (a projected ServiceAccount token, a refreshed OIDC token) is picked up;
"--token-file -" copies the token from standard input instead.`,
		Example: `  kiln config set-context prod --server https://kiln.example.com --token-file ~/prod.token --namespace team-nlp --use
  kiln config set-context --current --namespace team-cv`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Name = args[0]
			}
			o.changed = map[string]bool{}
			for _, flag := range []string{"server", "token", "token-file", "certificate-authority", "namespace"} {
				o.changed[flag] = cmd.Flags().Changed(flag)
			}
			return factory.Run(cmd.Context(), o, runF, run)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Context.Server, "server", "", "API server URL, https://... (or http://... for h2c)")
	fl.StringVar(&o.Context.Token, "token", "", "bearer token (prefer --token-file)")
	fl.StringVar(&o.TokenFile, "token-file", "", "file holding the token, read again for every call (- copies the token from standard input)")
	fl.StringVar(&o.Context.CertificateAuthority, "certificate-authority", "", "PEM file of the CA that signs the server's certificate")
	fl.StringVar(&o.Context.Namespace, "namespace", "", "default namespace")
	fl.BoolVar(&o.Current, "current", false, "change the current context")
	fl.BoolVar(&o.Use, "use", false, "make it the current context")
	return cmd
}

func run(_ context.Context, o *Options) error {
	f, c := o.Factory, o.Context
	cfg, err := clientconfig.Load(f.ConfigPath)
	if err != nil {
		return err
	}
	name := ""
	switch {
	case o.Current && o.Name != "":
		return factory.Usagef("give a NAME or --current, not both")
	case o.Current:
		if name = cfg.CurrentContext; name == "" {
			return fmt.Errorf("--current: there is no current context in %s", f.ConfigPath)
		}
	case o.Name != "":
		name = o.Name
	default:
		return factory.Usagef("name the context, or use --current")
	}
	// A token file is kept as a file and read again for every call, so that a rotated token
	// (a projected ServiceAccount token, a refreshed OIDC token) is picked up; standard input
	// cannot be read again, so "-" copies the token it gives.
	if o.TokenFile != "" {
		data, err := f.ReadFile(o.TokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		if strings.TrimSpace(string(data)) == "" {
			return fmt.Errorf("--token-file %s: the file is empty: it should hold the bearer token", o.TokenFile)
		}
		if o.TokenFile == "-" {
			c.Token = strings.TrimSpace(string(data))
		} else if c.TokenFile, err = filepath.Abs(o.TokenFile); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
	}
	ctx := clientconfig.Context{Name: name}
	if existing := cfg.Context(name); existing != nil {
		ctx = *existing
	}
	// Only the fields given change.
	for flag, set := range map[string]func(){
		"server":                func() { ctx.Server = c.Server },
		"token":                 func() { ctx.Token, ctx.TokenFile = c.Token, "" },
		"token-file":            func() { ctx.Token, ctx.TokenFile = c.Token, c.TokenFile },
		"certificate-authority": func() { ctx.CertificateAuthority = c.CertificateAuthority },
		"namespace":             func() { ctx.Namespace = c.Namespace },
	} {
		if o.changed[flag] {
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
	if o.Use || cfg.CurrentContext == "" {
		cfg.CurrentContext = name
	}
	if err := cfg.Save(f.ConfigPath); err != nil {
		return err
	}
	_, err = fmt.Fprintf(f.IO.Out, "Context %q set in %s.\n", name, f.ConfigPath)
	return err
}
