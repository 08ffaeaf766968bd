// Package factory gives every command what it needs, lazily and replaceably in tests:
// the IO streams, the resolved client configuration, and the API clients.
package factory

import (
	"io"
	"net/http"
	"os"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"k8s.io/utils/clock"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

// Version is the CLI's version, set at build time (-ldflags -X).
var Version = "dev"

// Factory is shared by the commands.
type Factory struct {
	IO *iostreams.IOStreams
	// ConfigPath is the client configuration file (--config, KILN_CONFIG or the default).
	ConfigPath string
	// Overrides from global flags, applied over the configuration.
	Context, Server, Namespace string
	// Clock tells the time and runs timeouts (a fake clock in tests, so that they need not wait).
	Clock clock.Clock

	// Clients returns the API clients; tests replace it.
	Clients func() (*Clients, error)
}

// Clients are the API's services.
type Clients struct {
	Jobs     kilnv1connect.TrainJobServiceClient
	Runtimes kilnv1connect.RuntimeServiceClient
	Queues   kilnv1connect.QueueServiceClient
	Server   kilnv1connect.ServerServiceClient
	// Schedules are CronTrainJobs.
	Schedules kilnv1connect.CronTrainJobServiceClient
	// Namespace is where commands act unless told otherwise.
	Namespace string
	// ServerURL is the API server's URL, for messages.
	ServerURL string
}

// New returns the factory of the real CLI.
func New(io *iostreams.IOStreams) *Factory {
	f := &Factory{IO: io, ConfigPath: clientconfig.DefaultPath(), Clock: clock.RealClock{}}
	f.Clients = f.clients
	return f
}

// ResolveContext returns the context commands use: the configuration file, then KILN_*
// variables, then the global flags.
func (f *Factory) ResolveContext() (clientconfig.Context, error) {
	cfg, err := clientconfig.Load(f.ConfigPath)
	if err != nil {
		return clientconfig.Context{}, err
	}
	if f.Context != "" {
		cfg.CurrentContext = f.Context
		if cfg.Context(f.Context) == nil {
			return clientconfig.Context{}, Errorf("context %q is not in %s: list them with `kiln config get-contexts`", f.Context, f.ConfigPath)
		}
	}
	if f.Server != "" {
		// A server given on the command line needs no configuration file.
		kc, _ := cfg.Resolve()
		kc.Server = f.Server
		if err := kc.Validate(); err != nil {
			return kc, Errorf("--server: %v", err)
		}
		return f.withNamespace(kc), nil
	}
	kc, err := cfg.Resolve()
	if err != nil {
		return kc, err
	}
	return f.withNamespace(kc), nil
}

func (f *Factory) withNamespace(kc clientconfig.Context) clientconfig.Context {
	if f.Namespace != "" {
		kc.Namespace = f.Namespace
	}
	if kc.Namespace == "" {
		kc.Namespace = "default"
	}
	return kc
}

func (f *Factory) clients() (*Clients, error) {
	kc, err := f.ResolveContext()
	if err != nil {
		return nil, err
	}
	hc, err := kc.AuthenticatedClient()
	if err != nil {
		return nil, err
	}
	return NewClients(hc, kc.Server, kc.Namespace), nil
}

// NewClients returns the clients of the API server at url, calling through hc.
func NewClients(hc *http.Client, url, namespace string) *Clients {
	opts := []connect.ClientOption{connect.WithHTTPGet(), connect.WithSendGzip()}
	// Each call is a span of the command's trace, and carries its traceparent to the server.
	if otel, err := otelconnect.NewInterceptor(); err == nil {
		opts = append(opts, connect.WithInterceptors(otel))
	}
	return &Clients{
		Jobs:      kilnv1connect.NewTrainJobServiceClient(hc, url, opts...),
		Runtimes:  kilnv1connect.NewRuntimeServiceClient(hc, url, opts...),
		Queues:    kilnv1connect.NewQueueServiceClient(hc, url, opts...),
		Server:    kilnv1connect.NewServerServiceClient(hc, url, opts...),
		Schedules: kilnv1connect.NewCronTrainJobServiceClient(hc, url, opts...),
		Namespace: namespace,
		ServerURL: url,
	}
}

// ReadFile reads the file a flag names, or standard input for "-".
func (f *Factory) ReadFile(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(f.IO.In)
	}
	return os.ReadFile(path)
}
