// Package kiln is Kiln's Go SDK: submit, follow and control training jobs on a Kiln
// cluster through its API server, with the same verbs as the Python and TypeScript SDKs
// (shaped like the Kubeflow SDK's TrainerClient).
//
//	c, err := kiln.New(kiln.Options{}) // the Kiln configuration, as the kiln CLI reads it
//	name, err := c.Train(ctx, kiln.TrainOptions{
//		Runtime: "torch-distributed",
//		Trainer: &kiln.CustomTrainerContainer{Command: []string{"torchrun", "train.py"}, NumNodes: 2},
//		ActiveDeadlineSeconds: ptr(int64(28800)), TTLSecondsAfterFinished: ptr(int32(86400)),
//	})
//	job, err := c.WaitForJobStatus(ctx, name, []kiln.Status{kiln.StatusComplete}, kiln.WaitOptions{})
//
// A job is a trainer.kubeflow.org/v1alpha1 TrainJob: kubectl, the kiln CLI and the
// Kubeflow SDK see the same object. The generated API (messages and Connect clients) is
// github.com/kiln-ml/kiln/api/gen/kiln/v1; Client's Jobs, Runtimes, Queues and Server are
// its service clients, for what the verbs here do not cover. Schedules (CronTrainJobs) are
// created with CreateSchedule and followed with ListScheduleRuns.
package kiln

import (
	"fmt"
	"net/http"
	"os"

	"connectrpc.com/connect"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
)

// Options say which API server to call and as whom. Empty fields come from the Kiln
// configuration (KILN_CONFIG, default ~/.config/kiln/config.yaml) and the KILN_*
// environment variables, exactly as the kiln CLI reads them; Server alone needs no file.
type Options struct {
	// Server is the API server's URL, e.g. https://kiln.example.com.
	Server string
	// Token is the bearer token; TokenFile a file holding it, read for every call.
	Token, TokenFile string
	// CAFile holds the CAs that sign the server's certificate.
	CAFile string
	// Namespace is where calls act unless told otherwise (default: the context's, else "default").
	Namespace string
	// Context picks a context of the configuration file; ConfigFile names the file.
	Context, ConfigFile string
	// HTTPClient replaces the client built from the configuration (its token included).
	HTTPClient *http.Client
	// ClientOptions are added to the Connect clients', e.g. interceptors (tracing, a user
	// agent) or connect.WithHTTPGet(); the kiln CLI passes its own here.
	ClientOptions []connect.ClientOption
	// WarningHandler receives each warning the server gives with a job or schedule it created:
	// what may keep it from running (a missing claim, more than its queue admits, no command).
	// Default: printed to standard error as "Warning: ...", as kubectl prints Kubernetes'.
	WarningHandler func(warning string)
}

// Client calls one Kiln API server.
type Client struct {
	Jobs     kilnv1connect.TrainJobServiceClient
	Runtimes kilnv1connect.RuntimeServiceClient
	Queues   kilnv1connect.QueueServiceClient
	Server   kilnv1connect.ServerServiceClient
	// Schedules is the CronTrainJob service (schedules of TrainJobs).
	Schedules kilnv1connect.CronTrainJobServiceClient
	// Namespace is where calls act unless told otherwise.
	Namespace string
	// ServerURL is the API server's URL.
	ServerURL string
	// warn is Options.WarningHandler, or its default.
	warn func(string)
}

// warnAll hands each warning to the client's warning handler.
func (c *Client) warnAll(warnings []string) {
	warn := c.warn
	if warn == nil { // a Client built without New
		warn = stderrWarning
	}
	for _, w := range warnings {
		warn(w)
	}
}

// stderrWarning is the default WarningHandler.
func stderrWarning(w string) { fmt.Fprintf(os.Stderr, "Warning: %s\n", w) }

// New returns a client of the API server that opts and the Kiln configuration name.
func New(opts Options) (*Client, error) {
	ctx, err := ResolveContext(opts)
	if err != nil {
		return nil, err
	}
	hc := opts.HTTPClient
	if hc == nil {
		if hc, err = ctx.AuthenticatedClient(); err != nil {
			return nil, err
		}
	}
	copts := append([]connect.ClientOption{connect.WithSendGzip()}, opts.ClientOptions...)
	warn := opts.WarningHandler
	if warn == nil {
		warn = stderrWarning
	}
	ns := ctx.Namespace
	if ns == "" {
		ns = "default"
	}
	return &Client{
		Jobs:      kilnv1connect.NewTrainJobServiceClient(hc, ctx.Server, copts...),
		Runtimes:  kilnv1connect.NewRuntimeServiceClient(hc, ctx.Server, copts...),
		Queues:    kilnv1connect.NewQueueServiceClient(hc, ctx.Server, copts...),
		Server:    kilnv1connect.NewServerServiceClient(hc, ctx.Server, copts...),
		Schedules: kilnv1connect.NewCronTrainJobServiceClient(hc, ctx.Server, copts...),
		Namespace: ns,
		ServerURL: ctx.Server,
		warn:      warn,
	}, nil
}

// ResolveContext returns the server, credentials and namespace New calls with: the
// configuration file's context, the KILN_* variables over it, then opts over both. The
// namespace is empty when none of them names one (New then acts in "default"). A Context or
// Server of opts that is wrong is an *OptionError.
func ResolveContext(opts Options) (clientconfig.Context, error) {
	path := opts.ConfigFile
	if path == "" {
		path = clientconfig.DefaultPath()
	}
	cfg, err := clientconfig.Load(path)
	if err != nil {
		return clientconfig.Context{}, err
	}
	if opts.Context != "" {
		if cfg.Context(opts.Context) == nil {
			return clientconfig.Context{}, &OptionError{Option: "Context", Value: opts.Context, ConfigFile: path}
		}
		cfg.CurrentContext = opts.Context
	}
	ctx, err := cfg.Resolve()
	if opts.Server != "" {
		// A server given here needs no configuration file.
		ctx.Server, err = opts.Server, nil
	}
	if err != nil {
		return ctx, err
	}
	if opts.Token != "" {
		ctx.Token, ctx.TokenFile = opts.Token, ""
	}
	if opts.TokenFile != "" {
		ctx.Token, ctx.TokenFile = "", opts.TokenFile
	}
	if opts.CAFile != "" {
		ctx.CertificateAuthority = opts.CAFile
	}
	if opts.Namespace != "" {
		ctx.Namespace = opts.Namespace
	}
	if err := ctx.Validate(); err != nil {
		return ctx, &OptionError{Option: "Server", Value: ctx.Server, ConfigFile: path, Err: err}
	}
	return ctx, nil
}

// OptionError is a field of Options that is wrong. Option names it ("Context" or "Server"),
// so that a program can name its own flag instead (the kiln CLI says --server).
type OptionError struct {
	Option string
	// Value is what the field said; ConfigFile the configuration file read.
	Value, ConfigFile string
	// Err is what is wrong with a Server (nil for a Context not in the file).
	Err error
}

func (e *OptionError) Error() string {
	if e.Option == "Context" {
		return fmt.Sprintf("context %q is not in the Kiln configuration %s: list them with `kiln config get-contexts`", e.Value, e.ConfigFile)
	}
	return e.Option + ": " + e.Err.Error()
}

// Unwrap returns what is wrong.
func (e *OptionError) Unwrap() error { return e.Err }

func (c *Client) ns(namespace string) string {
	if namespace != "" {
		return namespace
	}
	return c.Namespace
}
