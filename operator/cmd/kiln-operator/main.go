// Command kiln-operator runs Kiln's controller manager: the TrainJob controller, which
// renders TrainJobs into JobSets and reports their progress.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	uberzap "go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kiln-ml/kiln/api/buildinfo"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	"github.com/kiln-ml/kiln/api/kueue"
	"github.com/kiln-ml/kiln/api/telemetry"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/api/version"
	"github.com/kiln-ml/kiln/operator/internal/attemptlogs"
	kilncontroller "github.com/kiln-ml/kiln/operator/internal/controller"
	"github.com/kiln-ml/kiln/operator/internal/controller/crontrainjob"
	"github.com/kiln-ml/kiln/operator/internal/controller/trainjob"
	kilncrds "github.com/kiln-ml/kiln/operator/internal/crds"
	"github.com/kiln-ml/kiln/operator/internal/eventrecorder"
	"github.com/kiln-ml/kiln/operator/internal/kubeclient"
	"github.com/kiln-ml/kiln/operator/internal/logging"
	"github.com/kiln-ml/kiln/operator/internal/manifests"
	"github.com/kiln-ml/kiln/operator/internal/metricsauth"
	"github.com/kiln-ml/kiln/operator/internal/render"
	"github.com/kiln-ml/kiln/operator/internal/statusserver"
	kilnwebhook "github.com/kiln-ml/kiln/operator/internal/webhook"
)

type options struct {
	version                 bool
	allowCRDDowngrade       bool
	metricsAddr, probeAddr  string
	pprofAddr               string
	metricsSecure           bool
	metricsCertDir          string
	leaderElect             bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	qps                     float64
	burst                   int
	concurrency             int
	kubeProtocol            string
	kubeIdleConnections     int
	gracefulShutdown        time.Duration
	shutdownDelay           time.Duration
	webhooks                bool
	webhookHost             string
	webhookPort             int
	webhookCertDir          string
	certManagement          string
	webhookNamespace        string
	webhookService          string
	webhookSecret           string
	preserveFor             string
	applyCRDs               bool
	applyManifests          string
	deleteManifests         string
	manifestsTimeout        time.Duration
	disaggregate            string
	releasePods             bool
	statusAddr              string
	statusURL               string
	statusCAFile            string
	statusQPS               float64
	statusBurst             int
	statusInterval          time.Duration
	keepLogs                bool
	historyInterval         time.Duration
	gcPercent               int
}

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers the Kubernetes API authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview); false serves plain HTTP to anyone who can reach the address")
	flag.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory of the metrics server's tls.crt and tls.key (reloaded when they change); empty: a self-signed certificate")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof profiles (heap, CPU, goroutines), unauthenticated: bind it to localhost or a port only admins reach; 0 disables it")
	flag.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader, so that only one replica reconciles")
	flag.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's)")
	flag.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 10*time.Second, "how long a leader's Lease lasts unrenewed: a standby takes over at most this long after the leader died")
	flag.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 7*time.Second, "how long the leader keeps trying to renew before it stops leading")
	flag.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often candidates try to acquire or renew the Lease")
	flag.Float64Var(&o.qps, "kube-api-qps", 50, "queries per second to the Kubernetes API")
	flag.IntVar(&o.burst, "kube-api-burst", 100, "burst of queries to the Kubernetes API")
	flag.StringVar(&o.kubeProtocol, "kube-api-protocol", kubeclient.HTTP1, "protocol of the controllers' requests to the Kubernetes API: http/1.1, a connection per request under way (when many deadlines fall due at once, status writes are answered sooner than over one shared connection), or h2, every request and watch over one HTTP/2 connection (client-go's default)")
	flag.IntVar(&o.kubeIdleConnections, "kube-api-idle-connections", 128, "with --kube-api-protocol=http/1.1: connections to the Kubernetes API kept open between requests; set it to the requests under way at the busiest (TrainJob workers, 32 JobSet deletions, kept-log streams), or each request past it pays a TLS handshake")
	flag.IntVar(&o.concurrency, "trainjob-concurrency", 32, "TrainJobs reconciled in parallel: each mostly waits for the apiserver, so more than the cores")
	flag.DurationVar(&o.gracefulShutdown, "graceful-shutdown-timeout", 30*time.Second, "how long running reconciles may finish after SIGTERM")
	flag.DurationVar(&o.shutdownDelay, "shutdown-delay", 0, "after SIGTERM, serve on this long before stopping: /readyz fails and every webhook answer closes its connection, so that the apiserver moves its kept-alive connections to the other replicas (set it longer than the Service's endpoints take to drop the pod)")
	flag.BoolVar(&o.webhooks, "enable-webhooks", true, "serve the TrainJob admission webhooks")
	flag.BoolVar(&o.keepLogs, "keep-attempt-logs", true, "keep the last MiB of the log of each deleted pod of a TrainJob (restarts, preemption, suspension, deadline) in a ConfigMap the TrainJob owns, for kiln logs --attempt")
	flag.StringVar(&o.webhookHost, "webhook-host", "", "address the webhook server listens on (default: all)")
	flag.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the webhook server")
	flag.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory of the webhook server's tls.crt and tls.key")
	flag.StringVar(&o.certManagement, "cert-management", "internal", "internal: issue, rotate and inject the webhook certificate (in a cluster); files: use the files in --webhook-cert-dir as they are")
	flag.StringVar(&o.webhookNamespace, "webhook-namespace", podNamespace(), "namespace of the webhook Service and certificate Secret")
	flag.StringVar(&o.webhookService, "webhook-service-name", "kiln-webhook", "Service in front of the webhook server")
	flag.StringVar(&o.webhookSecret, "webhook-secret-name", "kiln-webhook-certs", "Secret holding the webhook CA and certificate")
	flag.StringVar(&o.preserveFor, "preserve-fields-for", strings.Join(kilnwebhook.DefaultPreservingUsers, ","), "comma-separated users whose TrainJob updates keep Kiln-only fields they cannot express (Kueue's controller)")
	flag.BoolVar(&o.allowCRDDowngrade, "allow-crd-downgrade", false, "with --apply-crds: apply this operator's CRDs even over those a newer Kiln release applied (its newer fields' schema, and their values in stored objects, are lost)")
	flag.BoolVar(&o.applyCRDs, "apply-crds", false, "install or upgrade the trainer.kubeflow.org CRDs this operator is built with, wait until they are Established, and exit (the Helm chart's pre-upgrade hook)")
	flag.StringVar(&o.applyManifests, "apply-manifests", "", "server-side apply the objects in this YAML file, waiting (up to --manifests-timeout) until their kinds are served and their webhooks answer, and exit (the Helm chart's hook for its default Kueue queues)")
	flag.StringVar(&o.deleteManifests, "delete-manifests", "", "delete the objects in this YAML file and exit (the Helm chart's pre-delete hook)")
	flag.BoolVar(&o.releasePods, "release-pods", false, "remove the attempt-logs finalizer from every pod that carries it, and exit (the Helm chart's pre-delete hook: no pod waits on a removed operator)")
	flag.StringVar(&o.disaggregate, "disaggregate-clusterroles", "", "comma-separated ClusterRoles whose aggregationRule to remove, and exit (the Helm chart's pre-delete hook for Kueue's aggregated roles)")
	flag.DurationVar(&o.manifestsTimeout, "manifests-timeout", 5*time.Minute, "how long --apply-manifests waits for each object")
	flag.StringVar(&o.statusAddr, "status-server-bind-address", ":10443", "address of the status server, to which trainers report progress and metrics (upstream's KUBEFLOW_TRAINER_SERVER_URL protocol), served with the webhook certificate; 0 disables it and its injection into trainer pods")
	flag.StringVar(&o.statusURL, "status-server-url", "", "https://host:port at which trainer pods reach the status server (default: https://<webhook-service-name>.<webhook-namespace>.svc:<its port>)")
	flag.StringVar(&o.statusCAFile, "status-server-ca-file", "", "PEM CA certificate that trainer pods trust for the status server, copied into each namespace's ConfigMap "+kiln.StatusServerCAConfigMap+" (default: ca.crt in --webhook-cert-dir)")
	flag.Float64Var(&o.statusQPS, "status-server-qps", 50, "queries per second of the status server's own client (its status and history writes, token reviews), apart from the controllers'; a fifth of it at most goes to history writes")
	flag.IntVar(&o.statusBurst, "status-server-burst", 100, "burst of the status server's own client")
	flag.DurationVar(&o.statusInterval, "status-server-write-interval", time.Second, "least time between two writes of one TrainJob's status.trainerStatus: reports in between are coalesced")
	flag.DurationVar(&o.historyInterval, "status-server-history-interval", 10*time.Second, "least time between two writes of one TrainJob's metrics history (TrainJobMetrics)")
	flag.IntVar(&o.gcPercent, "gc-percent", defaultGCPercent, "how much the Go heap may grow over what the last collection kept before the next collection starts (GOGC; the GOGC environment variable, when set, wins): lower holds less memory for more collector CPU")
	flag.BoolVar(&o.version, "version", false, "print the version and exit")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if o.version {
		fmt.Println(version.Version)
		return
	}
	// Fields given to a logger are encoded when it writes: most reconciles write nothing.
	zapOpts.ZapOpts = append(zapOpts.ZapOpts, uberzap.WrapCore(logging.Lazy))
	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	// And klog's: client-go's and the status server's logs (klog.FromContext of a context
	// without a logger) go through the same logger, at the same verbosity, instead of
	// klog's own text at its -v (0), which dropped them. Contextual: klog.Background() is
	// this logger itself; without it klog wraps it in its own -v check, and every V(1) and
	// V(2) line of the status server was dropped.
	klog.SetLoggerWithOptions(logger, klog.ContextualLogger(true))
	if err := setGCPercent(o.gcPercent, os.Getenv("GOGC")); err != nil {
		ctrl.Log.Error(err, "Invalid flag")
		os.Exit(2)
	}
	if flag.NArg() > 0 {
		// A value with a comma written in a YAML flow list ends up here, silently ignored.
		ctrl.Log.Error(nil, "Unexpected arguments: kiln-operator takes flags only (quote a flag value that holds a comma)", "arguments", flag.Args())
		os.Exit(2)
	}
	if o.applyCRDs {
		if err := applyCRDs(ctrl.SetupSignalHandler(), o); err != nil {
			ctrl.Log.Error(err, "Applying the CRDs failed")
			os.Exit(1)
		}
		return
	}
	if o.applyManifests != "" || o.deleteManifests != "" || o.disaggregate != "" || o.releasePods {
		if err := runManifests(ctrl.SetupSignalHandler(), o); err != nil {
			ctrl.Log.Error(err, "Manifests failed")
			os.Exit(1)
		}
		return
	}
	ctx := ctrl.SetupSignalHandler()
	// Traces go out over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT (or its traces variant) is set.
	shutdownTelemetry, err := telemetry.Setup(ctx, "kiln-operator", version.Version, telemetry.Options{})
	if err != nil {
		ctrl.Log.Error(err, "Setting up OpenTelemetry")
		os.Exit(1)
	}
	err = run(ctx, o)
	if serr := shutdownTelemetry(context.Background()); serr != nil {
		ctrl.Log.Error(serr, "Flushing the traces")
	}
	if err != nil {
		ctrl.Log.Error(err, "Operator stopped")
		os.Exit(1)
	}
}

// defaultGCPercent is the operator's GOGC: Go's default, 100, lets the heap double between
// collections; 75 holds much less resident for a little more CPU (docs/performance.md, "The
// collector's target is 75, not Go's 100").
const defaultGCPercent = 75

// setGCPercent sets the collector's target from --gc-percent, unless GOGC is set (then the
// runtime already read it, and it stands).
func setGCPercent(percent int, gogc string) error {
	if gogc != "" {
		return nil
	}
	if percent <= 0 {
		return fmt.Errorf("--gc-percent=%d: must be a positive percentage (%d by default; GOGC=off disables the collector)", percent, defaultGCPercent)
	}
	debug.SetGCPercent(percent)
	return nil
}

// applyCRDs installs or upgrades the CRDs (see package crds).
func applyCRDs(ctx context.Context, o options) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := kilncrds.Apply(ctx, c, 2*time.Minute, kilncrds.Options{Version: version.Version, AllowDowngrade: o.allowCRDDowngrade}); err != nil {
		return err
	}
	ctrl.Log.Info("CRDs applied and Established")
	return nil
}

// runManifests applies or deletes the objects of a file (see package manifests).
func runManifests(ctx context.Context, o options) error {
	if (o.applyManifests != "") && (o.deleteManifests != "") {
		return fmt.Errorf("--apply-manifests and --delete-manifests: give one")
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.Log.WithName("manifests"))
	if o.disaggregate != "" {
		return manifests.Disaggregate(ctx, c, strings.Split(o.disaggregate, ","))
	}
	if o.releasePods {
		n, err := attemptlogs.ReleaseAll(ctx, c)
		ctrl.Log.Info("Released the pods held for their logs", "pods", n)
		return err
	}
	if o.deleteManifests != "" {
		objs, err := manifests.Read(o.deleteManifests)
		if err != nil {
			return err
		}
		return manifests.Delete(ctx, c, objs)
	}
	objs, err := manifests.Read(o.applyManifests)
	if err != nil {
		return err
	}
	return manifests.Apply(ctx, c, objs, 2*time.Second, o.manifestsTimeout)
}

// drainThenStop returns a context that ends delay after ctx does, having called drain when
// ctx ended. Until then the operator works as before: it keeps leading, reconciling and
// answering webhooks, so that a rolling update loses no admission.
func drainThenStop(ctx context.Context, delay time.Duration, drain func()) context.Context {
	stopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-ctx.Done()
		drain()
		if delay > 0 {
			ctrl.Log.Info("Draining before shutdown: not ready, and every webhook answer closes its connection", "for", delay)
			time.Sleep(delay)
		}
		stop()
	}()
	return stopCtx
}

// podNamespace is the namespace the operator runs in, when it runs in a pod.
func podNamespace() string {
	if data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(data))
	}
	return "kiln-system"
}

// The metrics endpoint authenticates and authorizes its callers through the Kubernetes API.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serves the metrics (controller-runtime's and Kiln's kiln_*), over HTTPS to
// authorized callers unless --metrics-secure=false.
func metricsOptions(o options) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = metricsauth.Filter
		opts.CertDir = o.metricsCertDir
		opts.TLSOpts = []func(*tls.Config){kilnwebhook.HTTP1Only}
	}
	return opts
}

// Leader election, in the operator's namespace (the chart's; kiln-system by default).
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=kiln-system,resources=leases,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",namespace=kiln-system,resources=events,verbs=create;patch

func run(ctx context.Context, o options) error {
	scheme := runtime.NewScheme()
	// Kueue's types: the controller reads a queued job's Workload for its admission time.
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme, kiln.AddToScheme, jobsetv1alpha2.AddToScheme, kueue.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	webhookServer := kilnwebhook.NewServer(o.webhookHost, o.webhookPort, o.webhookCertDir)
	// SIGTERM drains the webhook server for --shutdown-delay; then the manager stops.
	ctx = drainThenStop(ctx, o.shutdownDelay, webhookServer.Drain)
	// One HTTP client for the controllers' cache and client, Events, log streams and the
	// status server (each with its own rate limit). Leader election, discovery and the
	// metrics endpoint's reviews keep controller-runtime's: they are few, and apart.
	httpClient, err := kubeclient.HTTPClientFor(cfg, o.kubeProtocol, o.kubeIdleConnections)
	if err != nil {
		return err
	}
	cacheOpts, clientOpts := kilncontroller.CacheOptions(), kilncontroller.ClientOptions()
	cacheOpts.HTTPClient, clientOpts.HTTPClient = httpClient, httpClient
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Client:                  clientOpts,
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "kiln-operator.trainer.kubeflow.org",
		LeaderElectionNamespace: o.leaderElectionNamespace,
		LeaseDuration:           &o.leaseDuration,
		RenewDeadline:           &o.renewDeadline,
		RetryPeriod:             &o.retryPeriod,
		GracefulShutdownTimeout: &o.gracefulShutdown,
		WebhookServer:           webhookServer,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := ctrlmetrics.Registry.Register(buildinfo.Collector("operator")); err != nil {
		return fmt.Errorf("registering kiln_build_info: %w", err)
	}
	// Events through a recorder of bounded memory (client-go's keeps every Event for six
	// minutes), with a client budget of its own as controller-runtime's recorder has.
	eventsClient, err := eventsv1client.NewForConfigAndClient(mgr.GetConfig(), httpClient)
	if err != nil {
		return fmt.Errorf("creating the events client: %w", err)
	}
	events := eventrecorder.New(eventsClient, scheme, eventrecorder.DefaultOptions())
	if err := mgr.Add(events); err != nil {
		return err
	}
	rec := trainjob.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), events.NewRecorder("kiln-trainjob-controller"), clock.RealClock{})
	status, err := statusServer(mgr, o)
	if err != nil {
		return err
	}
	rec.WithStatusServer(status).WithAttemptLogs(o.keepLogs)
	if err := rec.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency}); err != nil {
		return fmt.Errorf("setting up the TrainJob controller: %w", err)
	}
	// Pods marked before --keep-attempt-logs=false still carry the finalizer: the
	// controller runs either way, to keep their logs and let them go.
	logsClient, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), httpClient)
	if err != nil {
		return fmt.Errorf("creating the log reader: %w", err)
	}
	if err := attemptlogs.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), logsClient, clock.RealClock{}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the attempt-logs controller: %w", err)
	}
	cron := crontrainjob.NewReconciler(mgr.GetClient(), events.NewRecorder("kiln-crontrainjob-controller"), clock.RealClock{})
	if err := cron.SetupWithManager(mgr, controller.Options{}); err != nil {
		return fmt.Errorf("setting up the CronTrainJob controller: %w", err)
	}
	certsReady := make(chan struct{})
	statusReady := func(*http.Request) error { return nil }
	if status.BaseURL != "" {
		srv, err := addStatusServer(mgr, httpClient, o, certsReady)
		if err != nil {
			return err
		}
		statusReady = srv.ReadyChecker
	}
	switch {
	case !o.webhooks || o.certManagement == "files":
		close(certsReady)
	case o.certManagement == "internal":
		if err := kilnwebhook.ManageCerts(ctx, mgr, kilnwebhook.CertConfig{
			Namespace: o.webhookNamespace, ServiceName: o.webhookService, SecretName: o.webhookSecret, CertDir: o.webhookCertDir,
			ValidatingConfiguration: kilnwebhook.ValidatingConfigurationName, MutatingConfiguration: kilnwebhook.MutatingConfigurationName,
		}, certsReady); err != nil {
			return fmt.Errorf("managing webhook certificates: %w", err)
		}
	default:
		return fmt.Errorf("--cert-management=%q: use internal or files", o.certManagement)
	}
	if o.webhooks {
		// The webhook server starts once its certificate is on disk.
		go func() {
			<-certsReady
			if err := kilnwebhook.Setup(mgr, clock.RealClock{}, strings.Split(o.preserveFor, ",")); err != nil {
				ctrl.Log.Error(err, "Setting up the TrainJob webhooks")
				os.Exit(1)
			}
		}()
	}
	// Ready once the webhook server serves (the apiserver calls it for every TrainJob) and
	// the status server listens (every trainer of the replica's Service reports to it).
	ready := func(req *http.Request) error {
		select {
		case <-certsReady:
		default:
			return errors.New("webhook certificate not ready")
		}
		if err := statusReady(req); err != nil {
			return err
		}
		if !o.webhooks {
			return nil
		}
		return webhookServer.ReadyChecker(req)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return err
	}
	ctrl.Log.Info("Starting kiln-operator")
	return mgr.Start(ctx)
}

// statusServer is where trainer pods reach the status server, and the CA they trust.
func statusServer(mgr ctrl.Manager, o options) (trainjob.StatusServer, error) {
	if o.statusAddr == "0" || o.statusAddr == "" {
		return trainjob.StatusServer{}, nil
	}
	_, port, err := net.SplitHostPort(o.statusAddr)
	if err != nil {
		return trainjob.StatusServer{}, fmt.Errorf("--status-server-bind-address=%q: %w (use host:port, e.g. :10443, or 0 to disable)", o.statusAddr, err)
	}
	s := trainjob.StatusServer{StatusServer: render.StatusServer{BaseURL: o.statusURL}, CAFile: o.statusCAFile}
	if s.BaseURL == "" {
		s.BaseURL = fmt.Sprintf("https://%s.%s.svc:%s", o.webhookService, o.webhookNamespace, port)
	}
	if u, err := url.Parse(s.BaseURL); err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return trainjob.StatusServer{}, fmt.Errorf("--status-server-url=%q: give https://host:port, nothing after it", o.statusURL)
	}
	s.BaseURL = strings.TrimSuffix(s.BaseURL, "/")
	if s.CAFile == "" {
		s.CAFile = filepath.Join(o.webhookCertDir, "ca.crt")
	}
	return s, nil
}

// addStatusServer runs the status server on every replica once the serving certificate
// is on disk, with a client of its own: its writes and token reviews never take from the
// controllers' rate limit.
func addStatusServer(mgr ctrl.Manager, httpClient *http.Client, o options, certsReady <-chan struct{}) (*statusserver.Server, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.QPS, cfg.Burst = float32(o.statusQPS), o.statusBurst
	c, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("status server client: %w", err)
	}
	srv := statusserver.New(c, statusserver.Options{
		BindAddress: o.statusAddr, CertDir: o.webhookCertDir,
		// A fifth of the budget for the histories, the rest for the status writes and reviews.
		Writer: statusserver.WriterOptions{StatusInterval: o.statusInterval, HistoryInterval: o.historyInterval, HistoryQPS: o.statusQPS / 5},
	})
	return srv, mgr.Add(afterCerts{Server: srv, ready: certsReady})
}

// afterCerts starts the status server once the certificate is ready.
type afterCerts struct {
	*statusserver.Server
	ready <-chan struct{}
}

func (a afterCerts) Start(ctx context.Context) error {
	select {
	case <-a.ready:
	case <-ctx.Done():
		return nil
	}
	return a.Server.Start(ctx)
}
