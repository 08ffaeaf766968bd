// Package factory gives every command what it needs, lazily and replaceably in tests:
// the IO streams, the resolved client configuration, and the client of the API server (the
// Go SDK's: the CLI is built on it, as gh is on go-gh).
package factory

import (
	"errors"
	"io"
	"os"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"k8s.io/utils/clock"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/sdk-gen/go/kiln"
)

// Factory is shared by the commands.
type Factory struct {
	IO *iostreams.IOStreams
	// ConfigPath is the client configuration file (--config, KILN_CONFIG or the default).
	ConfigPath string
	// Overrides from global flags, applied over the configuration.
	Context, Server, Namespace string
	// Clock tells the time and runs timeouts (a fake clock in tests, so that they need not wait).
	Clock clock.Clock

	// Client returns the client of the API server; tests replace it.
	Client func() (*kiln.Client, error)
}

// New returns the factory of the real CLI.
func New(io *iostreams.IOStreams) *Factory {
	f := &Factory{IO: io, ConfigPath: clientconfig.DefaultPath(), Clock: clock.RealClock{}}
	f.Client = f.client
	return f
}

// Options are the SDK's options for the CLI: the configuration file and the global flags
// (the configuration file, then KILN_* variables, then the flags), and the Connect options
// of every call.
func (f *Factory) Options() kiln.Options {
	opts := []connect.ClientOption{connect.WithHTTPGet()}
	// Each call is a span of the command's trace, and carries its traceparent to the server.
	if otel, err := otelconnect.NewInterceptor(); err == nil {
		opts = append(opts, connect.WithInterceptors(otel))
	}
	return kiln.Options{ConfigFile: f.ConfigPath, Context: f.Context, Server: f.Server, Namespace: f.Namespace, ClientOptions: opts}
}

// ResolveContext returns the context commands use: the configuration file, then KILN_*
// variables, then the global flags.
func (f *Factory) ResolveContext() (clientconfig.Context, error) {
	kc, err := kiln.ResolveContext(f.Options())
	if err != nil {
		return kc, f.flagError(err)
	}
	if kc.Namespace == "" {
		kc.Namespace = "default"
	}
	return kc, nil
}

func (f *Factory) client() (*kiln.Client, error) {
	c, err := kiln.New(f.Options())
	return c, f.flagError(err)
}

// flagError names the global flag an error of the SDK's options is about.
func (f *Factory) flagError(err error) error {
	var oe *kiln.OptionError
	if !errors.As(err, &oe) {
		return err
	}
	switch oe.Option {
	case "Context":
		return Errorf("context %q is not in %s: list them with `kiln config get-contexts`", oe.Value, f.ConfigPath)
	case "Server":
		return Errorf("--server: %v", oe.Err)
	}
	return err
}

// ReadFile reads the file a flag names, or standard input for "-".
func (f *Factory) ReadFile(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(f.IO.In)
	}
	return os.ReadFile(path)
}
