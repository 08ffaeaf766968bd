package factory

import (
	"context"

	"github.com/spf13/cobra"
)

// Run hands o to runF when a test gave one (so that the test sees what was parsed, as in
// cli/cli), and to run otherwise.
func Run[O any](ctx context.Context, o *O, runF, run func(context.Context, *O) error) error {
	if runF != nil {
		return runF(ctx, o)
	}
	return run(ctx, o)
}

// RunE is the RunE of a command that takes no arguments: Run with the command's context.
func RunE[O any](o *O, runF, run func(context.Context, *O) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		return Run(cmd.Context(), o, runF, run)
	}
}

// RunNameE is the RunE of a command whose one argument is a NAME: it sets *name, then Run.
func RunNameE[O any](o *O, name *string, runF, run func(context.Context, *O) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		*name = args[0]
		return Run(cmd.Context(), o, runF, run)
	}
}
