// Package runtimes is `kiln runtimes`: the runtimes jobs run on. Each verb is a package of
// its own; this one wires them.
package runtimes

import (
	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/cmd/runtimes/get"
	"github.com/kiln-ml/kiln/cli/internal/cmd/runtimes/list"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// NewCmdRuntimes returns `kiln runtimes`.
func NewCmdRuntimes(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runtimes",
		Short: "List and show the runtimes jobs run on",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(list.NewCmdList(f, nil), get.NewCmdGet(f, nil))
	return cmd
}
