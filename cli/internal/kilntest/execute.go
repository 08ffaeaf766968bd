package kilntest

import (
	"bytes"

	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

// Execute runs cmd, made with a factory of io (Server.Factory), with args, and returns what it
// printed on standard output and standard error.
func Execute(cmd *cobra.Command, io *iostreams.IOStreams, args ...string) (stdout, stderr string, err error) {
	if args == nil {
		// No arguments, not the test binary's (cobra reads os.Args for nil): -update is one.
		args = []string{}
	}
	cmd.SetArgs(args)
	cmd.SetOut(io.Out)
	cmd.SetErr(io.ErrOut)
	err = cmd.Execute()
	return io.Out.(*bytes.Buffer).String(), io.ErrOut.(*bytes.Buffer).String(), err
}
