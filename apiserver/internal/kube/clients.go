package kube

// The shared caches, read with the server's own identity: TrainJobs and runtimes, the pods
// of JobSets (a job's steps) and the runtime snapshots the operator pins jobs to
// (ConfigMaps labelled kiln.dev/runtime-snapshot; RBAC cannot select by label) and the
// metadata of those that keep earlier attempts' logs (kiln.dev/attempt-logs-of), Kueue's
// workloads, queues, flavors and topologies (with the labels of nodes, where Kueue places on
// a topology), and CronTrainJobs.
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs;trainingruntimes;clustertrainingruntimes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods;configmaps,verbs=list;watch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads;localqueues;clusterqueues;resourceflavors;topologies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups=kiln.dev,resources=crontrainjobs,verbs=get;list;watch

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Clients are the server's ways into Kubernetes.
type Clients struct {
	// AsCaller makes every call as the caller found in the call's context (impersonation),
	// so Kubernetes RBAC decides and audit logs name the caller.
	AsCaller     client.WithWatch
	CoreAsCaller kubernetes.Interface
	// Self is the server's own identity: TokenReviews, SubjectAccessReviews, discovery.
	Self kubernetes.Interface
	// Cache holds TrainJobs, runtimes, the pods of JobSets, runtime snapshots and Kueue's
	// objects, read with the server's own identity. Every read from it is authorized for
	// the caller first (Authorizer).
	Cache cache.Cache
	// KeptLogs holds the metadata (labels, owner) of the ConfigMaps that keep the logs of
	// jobs' earlier attempts, indexed by job (IndexAttemptLogsOf): a job's view names its kept
	// attempts without a call to Kubernetes. Reading a kept log itself is a live call.
	KeptLogs cache.Cache
	// Recent holds the TrainJobs and CronTrainJobs this server created until Cache has them:
	// lists add them (SortedWithRecent).
	Recent     *Recent
	Authorizer *Authorizer
	// KubernetesVersion is the cluster's, e.g. v1.36.3.
	KubernetesVersion string

	mapper meta.RESTMapper
	// trainJobNames keeps the cached TrainJobs' names in order, once Start made it.
	trainJobNames atomic.Pointer[Names]
	// kueue and crons are the optional APIs: Kueue's, and the CronTrainJob CRD.
	kueue, crons *optionalAPI
	options      Options
}

// Options tune the clients.
type Options struct {
	// AuthzCacheTTL is how long a SubjectAccessReview verdict is reused.
	AuthzCacheTTL time.Duration
	// DiscoveryInterval is how often an optional API that is not installed is looked for
	// again (default 10s): installing Kueue after Kiln needs no restart.
	DiscoveryInterval time.Duration
	// RequireKueue makes Start wait until Kueue's API is served, so that the server is not
	// ready before (a chart that installs Kueue with Kiln, whose CRDs may appear after the
	// server starts).
	RequireKueue bool
	// Log reports optional APIs as they appear.
	Log *slog.Logger
}

// optionalAPI is an API the server uses where it is installed: its kinds are cached once
// the API is served, whether at start or later.
type optionalAPI struct {
	name  string
	gvk   schema.GroupVersionKind
	kinds func() []client.Object
	index func(ctx context.Context, c cache.Cache) error
	// recent, where set, is told of the first kind's adds.
	recent *Recent
	served atomic.Bool
}

// TrainJobNames keeps the cached TrainJobs' names in order (lists page through it): nil
// until Start has begun caching them.
func (c *Clients) TrainJobNames() *Names { return c.trainJobNames.Load() }

// Kueue reports whether Kueue's API is served (and its objects cached).
func (c *Clients) Kueue() bool { return c.kueue.served.Load() }

// Crons reports whether the CronTrainJob CRD is served (and CronTrainJobs cached).
func (c *Clients) Crons() bool { return c.crons.served.Load() }

// Scheme knows every typed kind the server reads.
func Scheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme, kiln.AddToScheme, jobsetv1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// NewClients builds the clients from the server's own configuration. The cache is not
// started: Start does that.
func NewClients(cfg *rest.Config, o Options) (*Clients, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	self, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	version, err := self.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reaching Kubernetes at %s: %w", cfg.Host, err)
	}
	selfHTTP, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes HTTP client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, selfHTTP)
	if err != nil {
		return nil, fmt.Errorf("creating REST mapper: %w", err)
	}
	// The caller's clients share the server's connections and rate limit; only the
	// identity differs per request.
	// Each call on a caller's behalf is a span of the RPC's trace (with tracing configured).
	callerHTTP := &http.Client{Transport: otelhttp.NewTransport(impersonatingTransport{base: selfHTTP.Transport},
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "kubernetes " + r.Method + " " + r.URL.Path })),
		Timeout: selfHTTP.Timeout}
	asCaller, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: callerHTTP})
	if err != nil {
		return nil, fmt.Errorf("creating impersonating client: %w", err)
	}
	coreAsCaller, err := kubernetes.NewForConfigAndClient(cfg, callerHTTP)
	if err != nil {
		return nil, fmt.Errorf("creating impersonating client: %w", err)
	}
	podSelector, err := labels.NewRequirement(jobsetv1alpha2.JobSetNameKey, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	snapshotSelector, err := labels.NewRequirement(trainer.LabelRuntimeSnapshot, selection.In, []string{trainer.OwnSnapshot, trainer.SharedSnapshot})
	if err != nil {
		return nil, err
	}
	keptLogSelector, err := labels.NewRequirement(kiln.LabelAttemptLogsOf, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	c, err := cache.New(cfg, cache.Options{
		HTTPClient:       selfHTTP,
		Scheme:           scheme,
		Mapper:           mapper,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:       {Label: labels.NewSelector().Add(*podSelector)},
			&corev1.ConfigMap{}: {Label: labels.NewSelector().Add(*snapshotSelector)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating cache: %w", err)
	}
	// A cache of its own: Cache's ConfigMaps are the runtime snapshots, selected by another
	// label (a cache selects one set per kind).
	keptLogs, err := cache.New(cfg, cache.Options{
		HTTPClient:           selfHTTP,
		Scheme:               scheme,
		Mapper:               mapper,
		DefaultTransform:     cache.TransformStripManagedFields(),
		DefaultLabelSelector: labels.NewSelector().Add(*keptLogSelector),
	})
	if err != nil {
		return nil, fmt.Errorf("creating cache: %w", err)
	}
	if o.DiscoveryInterval <= 0 {
		o.DiscoveryInterval = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	recent := NewRecent(clock.RealClock{})
	return &Clients{
		AsCaller:          asCaller,
		CoreAsCaller:      coreAsCaller,
		Self:              self,
		Cache:             c,
		KeptLogs:          keptLogs,
		Recent:            recent,
		Authorizer:        &Authorizer{Client: self.AuthorizationV1().SubjectAccessReviews(), Clock: clock.RealClock{}, TTL: o.AuthzCacheTTL, MaxEntries: 100_000},
		KubernetesVersion: version.GitVersion,
		mapper:            mapper,
		kueue: &optionalAPI{name: "Kueue", gvk: WorkloadGVK,
			kinds: func() []client.Object {
				return []client.Object{New(WorkloadGVK), New(LocalQueueGVK), New(ClusterQueueGVK), New(FlavorGVK), New(TopologyGVK), NodeMeta()}
			},
			index: func(ctx context.Context, c cache.Cache) error {
				return c.IndexField(ctx, New(WorkloadGVK), IndexJobUID, byLabel(trainer.KueueJobUIDLabel))
			}},
		crons: &optionalAPI{name: "CronTrainJob", gvk: kiln.GroupVersion.WithKind(kiln.CronTrainJobKind),
			kinds: func() []client.Object { return []client.Object{&kiln.CronTrainJob{}} }, recent: recent},
		options: o,
	}, nil
}

// cachedKinds are the kinds the cache always holds; the optional APIs' come when they are
// served.
func cachedKinds() []client.Object {
	return []client.Object{&trainer.TrainJob{}, &trainer.ClusterTrainingRuntime{}, &trainer.TrainingRuntime{}, &corev1.Pod{}, &corev1.ConfigMap{}}
}

func byLabel(label string) client.IndexerFunc {
	return func(o client.Object) []string {
		if v := o.GetLabels()[label]; v != "" {
			return []string{v}
		}
		return nil
	}
}

// Cache indexes.
const (
	// IndexJobSetName indexes pods by the JobSet (thus the TrainJob) they belong to.
	IndexJobSetName = "kiln.jobSetName"
	// IndexJobUID indexes Kueue workloads by the UID of their job.
	IndexJobUID = "kiln.jobUID"
	// IndexAttemptLogsOf indexes KeptLogs by the name of the TrainJob whose logs they keep.
	IndexAttemptLogsOf = "kiln.attemptLogsOf"
)

// KeptLogMeta is an empty ConfigMap held as its metadata only (KeptLogs).
func KeptLogMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}
}

// Start starts the cache's informers and waits until they have synced: the optional APIs'
// too where they are served. Those that are not are looked for again every
// DiscoveryInterval until ctx ends, and cached once they appear; with RequireKueue, Start
// waits for Kueue's.
func (c *Clients) Start(ctx context.Context) error {
	if err := c.Cache.IndexField(ctx, &corev1.Pod{}, IndexJobSetName, byLabel(jobsetv1alpha2.JobSetNameKey)); err != nil {
		return fmt.Errorf("indexing pods: %w", err)
	}
	for _, obj := range cachedKinds() {
		informer, err := c.Cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		if _, ok := obj.(*trainer.TrainJob); ok {
			if err := c.Recent.watch(informer); err != nil {
				return fmt.Errorf("watching %T: %w", obj, err)
			}
			names, err := watchNames(informer)
			if err != nil {
				return fmt.Errorf("watching %T: %w", obj, err)
			}
			c.trainJobNames.Store(names)
		}
	}
	if err := c.KeptLogs.IndexField(ctx, KeptLogMeta(), IndexAttemptLogsOf, byLabel(kiln.LabelAttemptLogsOf)); err != nil {
		return fmt.Errorf("indexing kept logs: %w", err)
	}
	if _, err := c.KeptLogs.GetInformer(ctx, KeptLogMeta(), cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("watching kept logs: %w", err)
	}
	errc := make(chan error, 2)
	for _, ch := range []cache.Cache{c.Cache, c.KeptLogs} {
		go func() { errc <- ch.Start(ctx) }()
	}
	for _, ch := range []cache.Cache{c.Cache, c.KeptLogs} {
		if !ch.WaitForCacheSync(ctx) {
			select {
			case err := <-errc:
				return fmt.Errorf("starting cache: %w", err)
			default:
				return fmt.Errorf("cache did not sync: %w", ctx.Err())
			}
		}
	}
	missing := c.discover(ctx)
	if c.options.RequireKueue && !c.Kueue() {
		c.options.Log.Info("Waiting for Kueue's API to be served (Kueue is required)", "kind", WorkloadGVK.String())
	}
	for c.options.RequireKueue && !c.Kueue() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for Kueue's API: %w", ctx.Err())
		case <-time.After(time.Second):
		}
		missing = c.discover(ctx)
	}
	if missing {
		go func() {
			t := time.NewTicker(c.options.DiscoveryInterval)
			defer t.Stop()
			for c.discover(ctx) {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	return nil
}

// discover caches each optional API that has become served, and reports whether any is
// still missing.
func (c *Clients) discover(ctx context.Context) (missing bool) {
	for _, api := range []*optionalAPI{c.kueue, c.crons} {
		if api.served.Load() {
			continue
		}
		ok, err := servesKind(c.mapper, api.gvk)
		if err == nil && ok {
			err = api.start(ctx, c.Cache)
		}
		switch {
		case err != nil:
			c.options.Log.Warn("Looking for an optional API", "api", api.name, "err", err)
			missing = true
		case !ok:
			missing = true
		default:
			c.options.Log.Info("Serving an optional API", "api", api.name, "kind", api.gvk.String())
		}
	}
	return missing
}

// start caches the API's kinds, waits until they have synced and marks it served.
func (api *optionalAPI) start(ctx context.Context, c cache.Cache) error {
	if api.index != nil {
		if err := api.index(ctx, c); err != nil {
			return fmt.Errorf("indexing %s: %w", api.name, err)
		}
	}
	for i, obj := range api.kinds() {
		// Blocks until the informer has synced (the cache runs already).
		informer, err := c.GetInformer(ctx, obj)
		if err == nil && i == 0 && api.recent != nil {
			err = api.recent.watch(informer)
		}
		if err != nil {
			return fmt.Errorf("watching %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, err)
		}
	}
	api.served.Store(true)
	return nil
}

func servesKind(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", gvk, err)
	}
	return true, nil
}
