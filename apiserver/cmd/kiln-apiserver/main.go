// Command kiln-apiserver serves Kiln's Connect API in front of Kubernetes, acting as each
// caller: it authenticates bearer tokens (TokenReview, optionally OIDC) and makes every
// Kubernetes call impersonating the caller, so Kubernetes RBAC decides.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kiln-ml/kiln/api/telemetry"
	"github.com/kiln-ml/kiln/api/version"
	"github.com/kiln-ml/kiln/apiserver/internal/auth"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/server"
)

type options struct {
	kubeconfig      string
	qps             float64
	burst           int
	listen          string
	tlsListen       string
	tlsCert         string
	tlsKey          string
	unaryTimeout    time.Duration
	shutdownGrace   time.Duration
	maxRequestBytes int
	authnTTL        time.Duration
	authzTTL        time.Duration
	kueue           string
	audiences       string
	extraKeys       string
	oidc            auth.OIDCConfig
	logLevel        string
	pprofAddr       string
	version         bool
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the server's own identity (default: in-cluster, else $KUBECONFIG)")
	flag.Float64Var(&o.qps, "kube-api-qps", 200, "queries per second to Kubernetes, all callers together")
	flag.IntVar(&o.burst, "kube-api-burst", 400, "burst of queries to Kubernetes")
	flag.StringVar(&o.listen, "listen-address", "127.0.0.1:8090", "address to serve HTTP/1.1 and h2c on (empty: none)")
	flag.StringVar(&o.tlsListen, "tls-listen-address", "", "address to serve HTTPS on (needs --tls-cert-file and --tls-key-file)")
	flag.StringVar(&o.tlsCert, "tls-cert-file", "", "PEM certificate of the HTTPS listener (reloaded when it changes)")
	flag.StringVar(&o.tlsKey, "tls-key-file", "", "PEM key of the HTTPS listener")
	flag.DurationVar(&o.unaryTimeout, "unary-timeout", 30*time.Second, "deadline of every unary call (streams have none)")
	flag.DurationVar(&o.shutdownGrace, "shutdown-grace", 20*time.Second, "how long unary calls may finish after SIGTERM")
	flag.IntVar(&o.maxRequestBytes, "max-request-bytes", 4<<20, "largest request message accepted")
	flag.DurationVar(&o.authnTTL, "token-cache-ttl", 10*time.Second, "how long a token's TokenReview verdict is reused")
	flag.DurationVar(&o.authzTTL, "authorization-cache-ttl", 10*time.Second, "how long a SubjectAccessReview verdict is reused")
	flag.StringVar(&o.kueue, "kueue", "auto", "auto: serve Kueue's queues where Kueue is installed, looking for it every 10s if it is not; required: also be not ready until Kueue's API is served (Kueue installed together with Kiln)")
	flag.StringVar(&o.extraKeys, "impersonate-extra-keys", "", "comma-separated user extras to pass on to Kubernetes (each needs RBAC impersonate on userextras/<key>); RBAC reads none")
	flag.StringVar(&o.audiences, "token-audiences", "", "comma-separated audiences tokens must carry (empty: the Kubernetes apiserver's)")
	flag.StringVar(&o.oidc.IssuerURL, "oidc-issuer-url", "", "accept ID tokens of this OIDC issuer too (for clusters whose apiserver does not)")
	flag.StringVar(&o.oidc.ClientID, "oidc-client-id", "", "audience of accepted OIDC ID tokens")
	flag.StringVar(&o.oidc.UsernameClaim, "oidc-username-claim", "sub", "claim that names the user")
	flag.StringVar(&o.oidc.UsernamePrefix, "oidc-username-prefix", "oidc:", "prefix of OIDC user names, as RBAC sees them")
	flag.StringVar(&o.oidc.GroupsClaim, "oidc-groups-claim", "", "claim that lists the user's groups")
	flag.StringVar(&o.oidc.GroupsPrefix, "oidc-groups-prefix", "oidc:", "prefix of OIDC group names")
	flag.StringVar(&o.oidc.CAFile, "oidc-ca-file", "", "CA of the OIDC issuer (default: the system's)")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof profiles (heap, CPU, goroutines), unauthenticated: bind it to localhost or a port only admins reach; empty disables it")
	flag.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	flag.BoolVar(&o.version, "version", false, "print the version and exit")
	flag.Parse()
	if o.version {
		fmt.Println(version.Version)
		return
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "kiln-apiserver: --log-level=%q: want debug, info, warn or error\n", o.logLevel)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// client-go and controller-runtime log through the same structured logger.
	klog.SetLogger(logr.FromSlogHandler(log.Handler()))
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error("API server stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, log *slog.Logger) error {
	if o.listen == "" && o.tlsListen == "" {
		return errors.New("nothing to serve on: set --listen-address or --tls-listen-address")
	}
	if o.kueue != "auto" && o.kueue != "required" {
		return fmt.Errorf("--kueue=%q: use auto or required", o.kueue)
	}
	if (o.tlsListen != "") != (o.tlsCert != "" && o.tlsKey != "") {
		return errors.New("--tls-listen-address needs --tls-cert-file and --tls-key-file, and they need it")
	}
	if o.pprofAddr != "" {
		if err := servePprof(ctx, o.pprofAddr, log); err != nil {
			return err
		}
	}
	shutdownTelemetry, err := telemetry.Setup(ctx, "kiln-apiserver", version.Version, telemetry.Options{Metrics: true})
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTelemetry(context.Background()) }()

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the server's kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "kiln-apiserver/" + version.Version
	k, err := kube.NewClients(cfg, kube.Options{AuthzCacheTTL: o.authzTTL, RequireKueue: o.kueue == "required", Log: log})
	if err != nil {
		return err
	}
	authn, err := authenticator(ctx, o, k)
	if err != nil {
		return err
	}
	var extraKeys []string
	if o.extraKeys != "" {
		extraKeys = strings.Split(o.extraKeys, ",")
	}
	srv, err := server.New(k, authn, server.Options{UnaryTimeout: o.unaryTimeout, MaxRequestBytes: o.maxRequestBytes, ExtraKeys: extraKeys, Log: log})
	if err != nil {
		return err
	}
	var listeners []server.Listener
	if o.listen != "" {
		listeners = append(listeners, server.Listener{Addr: o.listen})
	}
	if o.tlsListen != "" {
		watcher, err := certwatcher.New(o.tlsCert, o.tlsKey)
		if err != nil {
			return fmt.Errorf("loading the TLS certificate: %w", err)
		}
		go func() { _ = watcher.Start(ctx) }()
		listeners = append(listeners, server.Listener{Addr: o.tlsListen, TLS: &tls.Config{
			MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate, NextProtos: []string{"h2", "http/1.1"},
		}})
	}
	go func() {
		start := time.Now()
		if err := k.Start(ctx); err != nil {
			log.Error("Cache failed", "err", err)
			_ = syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
			return
		}
		log.Info("Ready", "cacheSync", time.Since(start).Round(time.Millisecond).String(), "kubernetes", k.KubernetesVersion, "kueue", k.Kueue(), "cronTrainJobs", k.Crons())
		srv.SetReady(true)
	}()
	return srv.Serve(ctx, log, o.shutdownGrace, listeners...)
}

// servePprof serves Go's profiles on addr until ctx ends.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("Profiles server stopped", "err", err)
		}
	}()
	log.Info("Serving Go profiles", "address", l.Addr().String())
	return nil
}

func authenticator(ctx context.Context, o options, k *kube.Clients) (auth.Authenticator, error) {
	var audiences []string
	if o.audiences != "" {
		audiences = strings.Split(o.audiences, ",")
	}
	chain := auth.Chain{auth.TokenReview{Client: k.Self.AuthenticationV1().TokenReviews(), Audiences: audiences}}
	if o.oidc.IssuerURL != "" {
		hc := http.DefaultClient
		if o.oidc.CAFile != "" {
			pem, err := os.ReadFile(o.oidc.CAFile)
			if err != nil {
				return nil, fmt.Errorf("--oidc-ca-file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--oidc-ca-file %s holds no PEM certificate", o.oidc.CAFile)
			}
			hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		}
		oidcAuth, err := auth.NewOIDC(oidc.ClientContext(ctx, hc), o.oidc)
		if err != nil {
			return nil, err
		}
		// An ID token of the issuer is checked locally first; anything else goes to Kubernetes.
		chain = append(auth.Chain{oidcAuth}, chain...)
	}
	return &auth.Cached{Authenticator: chain, Clock: clock.RealClock{}, TTL: o.authnTTL, RejectedTTL: 2 * time.Second, MaxEntries: 100_000}, nil
}
