// Command kiln submits, follows and controls training jobs through Kiln's API server.
// Installed as kubectl-kiln it is also the kubectl plugin `kubectl kiln`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/kiln-ml/kiln/cli/internal/cmd/root"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

func main() {
	io := iostreams.System()
	f := factory.New(io)
	cmd := root.NewCmdRoot(f, filepath.Base(os.Args[0]))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		var ee *factory.ExitErr
		if !asSilent(err, &ee) {
			server := f.Server
			if kc, cerr := f.ResolveContext(); cerr == nil {
				server = kc.Server
			}
			fmt.Fprintln(io.ErrOut, "kiln: "+factory.Message(err, server))
		}
	}
	os.Exit(factory.ExitCode(err))
}

// asSilent reports whether err is an exit whose message was already shown.
func asSilent(err error, ee **factory.ExitErr) bool {
	ok := errors.As(err, ee)
	return ok && (*ee).Err == nil
}
