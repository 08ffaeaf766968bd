// Package config is `kiln config`: which servers, tokens and namespaces the CLI uses. Each
// verb is a package of its own; this one wires them.
package config

import (
	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/cmd/config/currentcontext"
	"github.com/kiln-ml/kiln/cli/internal/cmd/config/deletecontext"
	"github.com/kiln-ml/kiln/cli/internal/cmd/config/getcontexts"
	"github.com/kiln-ml/kiln/cli/internal/cmd/config/setcontext"
	"github.com/kiln-ml/kiln/cli/internal/cmd/config/usecontext"
	"github.com/kiln-ml/kiln/cli/internal/cmd/config/view"
	"github.com/kiln-ml/kiln/cli/internal/factory"
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
	cmd.AddCommand(view.NewCmdView(f, nil), getcontexts.NewCmdGetContexts(f, nil), currentcontext.NewCmdCurrentContext(f, nil),
		usecontext.NewCmdUseContext(f, nil), setcontext.NewCmdSetContext(f, nil), deletecontext.NewCmdDeleteContext(f, nil))
	return cmd
}
