// Package completion is `kiln completion`.
package completion

import (
	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// NewCmdCompletion returns `kiln completion bash|zsh|fish|powershell`.
func NewCmdCompletion(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print the completion script of a shell. To load it:

  bash:  source <(kiln completion bash)
  zsh:   kiln completion zsh > "${fpath[1]}/_kiln"
  fish:  kiln completion fish > ~/.config/fish/completions/kiln.fish`,
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), f.IO.Out
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			}
			return root.GenPowerShellCompletionWithDesc(out)
		},
	}
}
