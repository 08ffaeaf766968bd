package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/api/clientconfig"
	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/internal/stats"
)

// APIOptions shape the API server benchmark: the same user doing the same things through
// Kiln's API server and directly against Kubernetes, on one fresh local platform per run.
type APIOptions struct {
	Root string
	Runs int
	// Creates is how many TrainJobs each path creates, one after the other (latency).
	Creates int
	// Concurrency is how many callers load Get and List at once, for Duration each.
	Concurrency int
	Duration    time.Duration
	// ScaleJobs, when set, adds a run at that many TrainJobs: lists, Gets and `kiln list`
	// with that many in one namespace.
	ScaleJobs int
	Report    string
	Out       io.Writer
}

// DefaultAPIOptions are what `make bench` runs.
func DefaultAPIOptions(root string) APIOptions {
	return APIOptions{Root: root, Runs: 3, Creates: 200, Concurrency: 32, Duration: 10 * time.Second, Report: apiReportPath(root), Out: os.Stdout}
}

func apiReportPath(root string) string {
	if root == "" {
		return ""
	}
	return filepath.Join(root, "docs", "benchmarks-api.md")
}

// apiResult is one run's figures.
type apiResult struct {
	createAPI, createDirect []time.Duration
	getAPI, getDirect       load
	listAPI, listDirect     load
	idleRSS, loadedRSS      int64
	peakRSS                 int64
	jobs                    int
	// Wall times of listing every job from a shell: kiln list, kubectl get trainjobs with
	// an empty discovery cache (cold) and with a filled one.
	kilnList, kubectlCold, kubectlWarm []time.Duration
}

// load is what a fixed-duration load achieved.
type load struct {
	ok, failed int64
	took       time.Duration
	latencies  []time.Duration
	// firstErr is the first failure's message.
	firstErr string
}

func (l load) rate() float64 { return float64(l.ok) / l.took.Seconds() }

// RunAPI runs the API server benchmark and writes its report.
func RunAPI(ctx context.Context, o APIOptions) error {
	started := time.Now()
	var results []*apiResult
	for run := 1; run <= o.Runs; run++ {
		res, err := apiRunOnce(ctx, o, run)
		if err != nil {
			return fmt.Errorf("API run %d: %w", run, err)
		}
		results = append(results, res)
	}
	var scale *apiScaleResult
	if o.ScaleJobs > 0 {
		var err error
		if scale, err = apiScaleRun(ctx, o); err != nil {
			return fmt.Errorf("API run at %d TrainJobs: %w", o.ScaleJobs, err)
		}
	}
	return writeAPIReport(o, results, scale, started, time.Since(started))
}

// freshPlatform starts a fresh local platform on the KWOK fleet for the API suite, its log
// in the bench directory under name.
func freshPlatform(ctx context.Context, o APIOptions, name string) (*platform.Platform, func(), error) {
	cfg := platform.DefaultConfig(o.Root)
	cfg.RealNodes = 0 // the API server's figures are about the API, on the KWOK fleet
	cfg.SimulatedProgress = false
	logs := filepath.Join(cfg.StateDir, "..", "bench")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, nil, err
	}
	plog, err := os.Create(filepath.Join(logs, "platform-"+name+".log"))
	if err != nil {
		return nil, nil, err
	}
	p := &platform.Platform{Config: cfg, Out: plog}
	if err := p.Down(ctx); err != nil {
		plog.Close()
		return nil, nil, err
	}
	stop := func() {
		_ = p.Down(context.WithoutCancel(ctx))
		plog.Close()
	}
	if err := p.Up(ctx); err != nil {
		stop()
		return nil, nil, fmt.Errorf("starting the platform (log %s): %w", plog.Name(), err)
	}
	return p, stop, nil
}

// apiPlatform starts a fresh platform and the API suite's two paths to it as the demo
// user: the API server's client (and its client configuration) and a direct client.
func apiPlatform(ctx context.Context, o APIOptions, name string) (*platform.Platform, func(), kilnv1connect.TrainJobServiceClient, clientconfig.Context, client.Client, error) {
	p, stop, err := freshPlatform(ctx, o, name)
	if err != nil {
		return nil, nil, nil, clientconfig.Context{}, nil, err
	}
	api, kc, err := p.TrainJobAPI()
	if err == nil {
		var direct client.Client
		if direct, err = directClient(p, kc.Token); err == nil {
			return p, stop, api, kc, direct, nil
		}
	}
	stop()
	return nil, nil, nil, clientconfig.Context{}, nil, err
}

func apiRunOnce(ctx context.Context, o APIOptions, run int) (*apiResult, error) {
	fmt.Fprintf(o.Out, "API run %d/%d on a fresh platform\n", run, o.Runs)
	p, stop, api, kc, direct, err := apiPlatform(ctx, o, fmt.Sprintf("api-%d", run))
	if err != nil {
		return nil, err
	}
	defer stop()

	pid, ok := p.APIServerProcess().Running()
	if !ok {
		return nil, fmt.Errorf("kiln-apiserver is not running")
	}
	res := &apiResult{}
	idle, err := readProcUsage(pid)
	if err != nil {
		return nil, err
	}
	res.idleRSS = idle.rss
	// A namespace of the bench's own, the demo user allowed to train there: the demo
	// namespace has Kueue's "default" LocalQueue, whose defaulting would queue the jobs and
	// Kueue would run them, loading the machine the figures are taken on.
	ns := "bench-api"
	if err := apiNamespace(ctx, p, ns); err != nil {
		return nil, err
	}

	// Create: the two paths take turns, so that neither gets a quieter machine.
	const warmup = 10
	for i := range o.Creates + warmup {
		d, err := timed(func() error { return direct.Create(ctx, benchAPIJob(ns, fmt.Sprintf("direct-%d", i))) })
		if err != nil {
			return nil, fmt.Errorf("creating directly: %w", err)
		}
		a, err := timed(func() error {
			_, err := api.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{Namespace: ns, Source: &kilnv1.CreateTrainJobRequest_TrainJob{
				TrainJob: &kilnv1.NewTrainJob{Name: fmt.Sprintf("api-%d", i), Spec: &kilnv1.TrainJobSpec{Runtime: "torch-distributed", Suspend: true, Nodes: 2}},
			}}))
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("creating through the API: %w", err)
		}
		if i >= warmup {
			res.createDirect, res.createAPI = append(res.createDirect, d), append(res.createAPI, a)
		}
	}
	res.jobs = 2 * (o.Creates + warmup)
	fmt.Fprintf(o.Out, "  create p99: API %s, direct %s\n", stats.Percentile(res.createAPI, 99), stats.Percentile(res.createDirect, 99))

	names := make([]string, 0, res.jobs)
	for i := range o.Creates + warmup {
		names = append(names, fmt.Sprintf("api-%d", i), fmt.Sprintf("direct-%d", i))
	}
	var next atomic.Int64
	loadReads(ctx, o, api, direct, ns, func() string { return names[int(next.Add(1))%len(names)] }, res)
	fmt.Fprintf(o.Out, "  get: API %.0f/s, direct %.0f/s; list: API %.0f/s, direct %.0f/s\n",
		res.getAPI.rate(), res.getDirect.rate(), res.listAPI.rate(), res.listDirect.rate())
	loaded, err := readProcUsage(pid)
	if err != nil {
		return nil, err
	}
	res.loadedRSS, res.peakRSS = loaded.rss, loaded.peakRSS
	if err := cliTimes(ctx, p, kc, ns, cliRuns, res); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "  list from a shell: kiln %s, kubectl cold %s, warm %s\n",
		stats.Percentile(res.kilnList, 50), stats.Percentile(res.kubectlCold, 50), stats.Percentile(res.kubectlWarm, 50))
	return res, nil
}

// cliRuns is how often each command runs; the median is reported. At ScaleJobs, where
// each takes seconds, scaleCLIRuns.
const (
	cliRuns      = 15
	scaleCLIRuns = 3
)

// apiScaleResult is the run at ScaleJobs: idleRSS is the API server's once its cache
// holds them all.
type apiScaleResult struct {
	apiResult
	created time.Duration
}

// apiScaleRun creates o.ScaleJobs TrainJobs on a fresh platform, stops the operator, and
// loads Get and List and times the CLIs over them.
func apiScaleRun(ctx context.Context, o APIOptions) (*apiScaleResult, error) {
	fmt.Fprintf(o.Out, "API run at %d TrainJobs on a fresh platform\n", o.ScaleJobs)
	p, stop, api, kc, direct, err := apiPlatform(ctx, o, "api-scale")
	if err != nil {
		return nil, err
	}
	defer stop()
	const ns = "bench-api"
	if err := apiNamespace(ctx, p, ns); err != nil {
		return nil, err
	}
	admin, err := p.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = 5000, 10000
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	res := &apiScaleResult{}
	res.jobs = o.ScaleJobs
	name := func(i int) string { return fmt.Sprintf("tj-%05d", i) }
	begin := time.Now()
	if err := createMany(ctx, c, o.ScaleJobs, func(i int) client.Object { return benchAPIJob(ns, name(i)) }); err != nil {
		return nil, err
	}
	res.created = time.Since(begin)
	fmt.Fprintf(o.Out, "  %d TrainJobs created in %s\n", o.ScaleJobs, res.created.Round(time.Second))
	if err := p.OperatorProcess().Stop(30 * time.Second); err != nil {
		return nil, fmt.Errorf("stopping the operator: %w", err)
	}
	for n := 0; n < o.ScaleJobs; {
		if n, err = countThroughAPI(ctx, api, ns); err != nil {
			return nil, err
		}
		if time.Since(begin) > 30*time.Minute {
			return nil, fmt.Errorf("the API server lists %d of %d TrainJobs after %s", n, o.ScaleJobs, time.Since(begin).Round(time.Second))
		}
		if n < o.ScaleJobs {
			time.Sleep(2 * time.Second)
		}
	}
	pid, ok := p.APIServerProcess().Running()
	if !ok {
		return nil, fmt.Errorf("kiln-apiserver is not running")
	}
	held, err := readProcUsage(pid)
	if err != nil {
		return nil, err
	}
	res.idleRSS = held.rss
	var next atomic.Int64
	loadReads(ctx, o, api, direct, ns, func() string { return name(int(next.Add(1)) % o.ScaleJobs) }, &res.apiResult)
	fmt.Fprintf(o.Out, "  get: API %.0f/s, direct %.0f/s; list: API %.0f/s (p99 %s), direct %.0f/s (p99 %s)\n",
		res.getAPI.rate(), res.getDirect.rate(), res.listAPI.rate(), stats.Percentile(res.listAPI.latencies, 99),
		res.listDirect.rate(), stats.Percentile(res.listDirect.latencies, 99))
	loaded, err := readProcUsage(pid)
	if err != nil {
		return nil, err
	}
	res.loadedRSS, res.peakRSS = loaded.rss, loaded.peakRSS
	if err := cliTimes(ctx, p, kc, ns, scaleCLIRuns, &res.apiResult); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "  list from a shell: kiln %s, kubectl warm %s\n", stats.Percentile(res.kilnList, 50), stats.Percentile(res.kubectlWarm, 50))
	return res, nil
}

// loadReads loads Gets (of the jobs pick names, in turn) and lists of the first 100 jobs of
// ns, through the API server and directly, one after the other, into res.
func loadReads(ctx context.Context, o APIOptions, api kilnv1connect.TrainJobServiceClient, direct client.Client, ns string, pick func() string, res *apiResult) {
	res.getAPI = hammer(ctx, o, func(ctx context.Context) error {
		_, err := api.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: ns, Name: pick()}))
		return err
	})
	res.getDirect = hammer(ctx, o, func(ctx context.Context) error {
		return direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: pick()}, &trainer.TrainJob{})
	})
	res.listAPI = hammer(ctx, o, func(ctx context.Context) error {
		_, err := api.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: ns, PageSize: 100}))
		return err
	})
	res.listDirect = hammer(ctx, o, func(ctx context.Context) error {
		return direct.List(ctx, &trainer.TrainJobList{}, client.InNamespace(ns), client.Limit(100))
	})
}

// countThroughAPI counts the TrainJobs the API server lists in ns.
func countThroughAPI(ctx context.Context, api kilnv1connect.TrainJobServiceClient, ns string) (int, error) {
	req := &kilnv1.ListTrainJobsRequest{Namespace: ns, PageSize: 1000}
	n := 0
	for {
		res, err := api.ListTrainJobs(ctx, connect.NewRequest(req))
		if err != nil {
			return 0, fmt.Errorf("listing through the API server: %w", err)
		}
		n += len(res.Msg.GetTrainJobs())
		if req.PageToken = res.Msg.GetNextPageToken(); req.PageToken == "" {
			return n, nil
		}
	}
}

// cliTimes times `kiln list` and `kubectl get trainjobs`, each a new process as from a
// shell, as the same user over the same jobs, output to a pipe that is read and dropped.
func cliTimes(ctx context.Context, p *platform.Platform, kc clientconfig.Context, ns string, runs int, res *apiResult) error {
	admin, err := p.RESTConfig()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "kiln-bench-cli")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kcfg := clientcmdapi.NewConfig()
	kcfg.Clusters["kiln"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	kcfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: kc.Token}
	kcfg.Contexts["kiln"] = &clientcmdapi.Context{Cluster: "kiln", AuthInfo: "user", Namespace: ns}
	kcfg.CurrentContext = "kiln"
	if err := clientcmd.WriteToFile(*kcfg, kubeconfig); err != nil {
		return err
	}
	run := func(env []string, name string, args ...string) (time.Duration, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		start := time.Now()
		err := cmd.Run()
		return time.Since(start), err
	}
	kiln := []string{"KILN_CONFIG=" + p.ClientConfigFile(), "NO_COLOR=1"}
	warmCache := filepath.Join(dir, "warm")
	for i := range runs {
		d, err := run(kiln, p.Bin("kiln"), "list", "-n", ns)
		if err != nil {
			return fmt.Errorf("kiln list: %w", err)
		}
		res.kilnList = append(res.kilnList, d)
		cold := []string{"KUBECONFIG=" + kubeconfig, "KUBECACHEDIR=" + filepath.Join(dir, fmt.Sprintf("cold-%d", i))}
		if d, err = run(cold, p.Bin("kubectl"), "get", "trainjobs"); err != nil {
			return fmt.Errorf("kubectl get trainjobs: %w", err)
		}
		res.kubectlCold = append(res.kubectlCold, d)
		warm := []string{"KUBECONFIG=" + kubeconfig, "KUBECACHEDIR=" + warmCache}
		if d, err = run(warm, p.Bin("kubectl"), "get", "trainjobs"); err != nil {
			return fmt.Errorf("kubectl get trainjobs: %w", err)
		}
		if i > 0 { // the first run fills the cache
			res.kubectlWarm = append(res.kubectlWarm, d)
		}
	}
	return nil
}

func benchAPIJob(ns, name string) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2)},
			Suspend:    ptr.To(true),
		},
	}
}

// directClient reaches Kubernetes itself as the user the API server's client config names
// (the same token), so both paths are the same caller with the same RBAC.
// apiNamespace creates namespace ns and lets the demo user train there.
func apiNamespace(ctx context.Context, p *platform.Platform, ns string) error {
	admin, err := p.RESTConfig()
	if err != nil {
		return err
	}
	c, err := client.New(admin, client.Options{})
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	binding := platform.Binding("RoleBinding", ns, platform.DemoUser, "kiln-user", platform.DemoNamespace, platform.DemoUser)
	if err := c.Create(ctx, binding); err != nil {
		return fmt.Errorf("letting %s train in namespace %s: %w", platform.DemoUser, ns, err)
	}
	return nil
}

func directClient(p *platform.Platform, token string) (client.Client, error) {
	admin, err := p.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{Host: admin.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}, QPS: 5000, Burst: 10000}
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// hammer runs call from o.Concurrency callers for o.Duration.
func hammer(ctx context.Context, o APIOptions, call func(context.Context) error) load {
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		out      load
		ok, fail atomic.Int64
	)
	start := time.Now()
	for range o.Concurrency {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				d, err := timed(func() error { return call(ctx) })
				switch {
				case ctx.Err() != nil:
				case err != nil && strings.Contains(err.Error(), "would exceed context deadline"):
					// client-go's rate limiter refusing a wait past the load's end: the
					// window closing, not a failed call.
				case err != nil:
					if fail.Add(1) == 1 {
						mu.Lock()
						out.firstErr = err.Error()
						mu.Unlock()
					}
				default:
					ok.Add(1)
					mine = append(mine, d)
				}
			}
			mu.Lock()
			out.latencies = append(out.latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	out.ok, out.failed, out.took = ok.Load(), fail.Load(), time.Since(start)
	return out
}

// apiRow is a figure of the report, through the API server and direct.
type apiRow struct {
	name      string
	api, dir  func(*apiResult) float64
	unit      string
	decimals  int
	compareAs string // "ratio" or "overhead"
	// scale marks the figures the run at ScaleJobs gives too.
	scale bool
}

func apiRows(o APIOptions) []apiRow {
	ms := func(ds []time.Duration, p float64) float64 { return stats.Percentile(ds, p).Seconds() * 1000 }
	return []apiRow{
		{"Create, p50", func(r *apiResult) float64 { return ms(r.createAPI, 50) }, func(r *apiResult) float64 { return ms(r.createDirect, 50) }, " ms", 1, "overhead", false},
		{"Create, p99", func(r *apiResult) float64 { return ms(r.createAPI, 99) }, func(r *apiResult) float64 { return ms(r.createDirect, 99) }, " ms", 1, "overhead", false},
		{fmt.Sprintf("Get, requests/s (%d callers)", o.Concurrency), func(r *apiResult) float64 { return r.getAPI.rate() }, func(r *apiResult) float64 { return r.getDirect.rate() }, "", 0, "ratio", true},
		{"Get, p99 under that load", func(r *apiResult) float64 { return ms(r.getAPI.latencies, 99) }, func(r *apiResult) float64 { return ms(r.getDirect.latencies, 99) }, " ms", 1, "ratio", true},
		{"`kiln list` vs `kubectl get trainjobs` (cold discovery cache), whole process", func(r *apiResult) float64 { return ms(r.kilnList, 50) }, func(r *apiResult) float64 { return ms(r.kubectlCold, 50) }, " ms", 0, "ratio", false},
		{"`kiln list` vs `kubectl get trainjobs` (warm discovery cache)", func(r *apiResult) float64 { return ms(r.kilnList, 50) }, func(r *apiResult) float64 { return ms(r.kubectlWarm, 50) }, " ms", 0, "ratio", true},
		{fmt.Sprintf("List 100 jobs, requests/s (%d callers)", o.Concurrency), func(r *apiResult) float64 { return r.listAPI.rate() }, func(r *apiResult) float64 { return r.listDirect.rate() }, "", 0, "ratio", true},
		{"List, p50 under that load", func(r *apiResult) float64 { return ms(r.listAPI.latencies, 50) }, func(r *apiResult) float64 { return ms(r.listDirect.latencies, 50) }, " ms", 1, "ratio", true},
		{"List, p99 under that load", func(r *apiResult) float64 { return ms(r.listAPI.latencies, 99) }, func(r *apiResult) float64 { return ms(r.listDirect.latencies, 99) }, " ms", 1, "ratio", true},
	}
}

// apiSpread is f over the runs: median, min and max.
func apiSpread(results []*apiResult, f func(*apiResult) float64) spread {
	vs := make([]float64, 0, len(results))
	for _, r := range results {
		vs = append(vs, f(r))
	}
	return spreadOfValues(vs)
}

// apiTable writes rows over results.
func apiTable(b *strings.Builder, rows []apiRow, results []*apiResult) {
	fmt.Fprintf(b, "| figure | through the API server | direct to Kubernetes | API / direct |\n|---|---|---|---|\n")
	for _, r := range rows {
		a, d := apiSpread(results, r.api), apiSpread(results, r.dir)
		cmp := ratio(a, d)
		if r.compareAs == "overhead" {
			cmp = fmt.Sprintf("%+.1f ms", a.median-d.median)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", r.name, a.String(r.unit, r.decimals), d.String(r.unit, r.decimals), cmp)
	}
}

// failedCalls says how many calls of each load failed over results, with the first error.
func failedCalls(results []*apiResult) string {
	failures := map[string]int64{}
	firstErr := map[string]string{}
	for _, r := range results {
		for name, l := range map[string]load{"Get through the API server": r.getAPI, "Get direct": r.getDirect, "List through the API server": r.listAPI, "List direct": r.listDirect} {
			failures[name] += l.failed
			if firstErr[name] == "" {
				firstErr[name] = l.firstErr
			}
		}
	}
	var failed []string
	for _, name := range []string{"Get through the API server", "Get direct", "List through the API server", "List direct"} {
		if failures[name] > 0 {
			failed = append(failed, fmt.Sprintf("%s: %d (first: %s)", name, failures[name], firstErr[name]))
		}
	}
	if len(failed) == 0 {
		return "none"
	}
	return strings.Join(failed, "; ")
}

func writeAPIReport(o APIOptions, results []*apiResult, scale *apiScaleResult, started time.Time, took time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Kiln API server benchmark\n\n")
	target := "bench-api"
	if len(results) == 0 {
		target = "bench-api-scale"
	}
	fmt.Fprintf(&b, "%s\n\n", generatedBy(target, started, took))
	mib := func(results []*apiResult, f func(*apiResult) int64) spread {
		return apiSpread(results, func(r *apiResult) float64 { return float64(f(r)) / (1 << 20) })
	}
	if len(results) > 0 {
		fmt.Fprintf(&b, "One user (the local platform's `kiln-demo` ServiceAccount token) does the same things through Kiln's API server "+
			"(Connect protocol over HTTPS, HTTP/2) and directly against kube-apiserver (client-go, same token, same RBAC), on a fresh "+
			"local platform per run, in a namespace of its own without a LocalQueue (so that Kueue leaves the suspended jobs alone). Creates: %d per path per run, one at a time, the paths taking turns (after 10 warm-up creates). "+
			"Get and List: %d concurrent callers for %s per path, over the %d suspended TrainJobs the creates left. "+
			"The CLI rows time a whole process, from a shell, listing all %[6]d jobs (medians of %[7]d runs each). "+
			"Figures are the median of %[5]d runs, with min–max.\n\n", o.Creates, o.Concurrency, o.Duration, results[0].jobs, len(results), results[0].jobs, cliRuns)
		apiTable(&b, apiRows(o), results)
		fmt.Fprintf(&b, "\nkiln-apiserver memory (RSS): %s idle after start, %s after the load, peak %s.\n",
			mib(results, func(r *apiResult) int64 { return r.idleRSS }).String(" MiB", 0),
			mib(results, func(r *apiResult) int64 { return r.loadedRSS }).String(" MiB", 0),
			mib(results, func(r *apiResult) int64 { return r.peakRSS }).String(" MiB", 0))
		fmt.Fprintf(&b, "Failed calls during the loads: %s.\n", failedCalls(results))
		fmt.Fprintf(&b, "\nEvery process shares the machine's cores: the load generator, the API server, kube-apiserver and etcd. "+
			"Gets and lists through the API server are answered from its informer cache after a SubjectAccessReview "+
			"(cached 10 s per caller and verb), and include the job's one truthful state; direct ones are kube-apiserver's.\n")
	}
	if scale != nil {
		one := []*apiResult{&scale.apiResult}
		fmt.Fprintf(&b, "\n## At %d TrainJobs\n\n", scale.jobs)
		fmt.Fprintf(&b, "On a fresh platform of its own, an admin client (32 at once) creates %[1]d suspended TrainJobs in one namespace "+
			"without a LocalQueue (%[2]s; Kiln's and Kueue's webhooks on each, Kiln's operator pinning and rendering them meanwhile), "+
			"then Kiln's operator is stopped, so that the rest of its work for them does not load the figures, and the "+
			"API server's cache is waited for until it lists them all. The same user then loads Get and List (page of 100, "+
			"the first page) with %[3]d callers for %[4]s per path, and lists all %[1]d from a shell (median of %[5]d runs each). One run.\n\n",
			scale.jobs, scale.created.Round(time.Second), o.Concurrency, o.Duration, scaleCLIRuns)
		var rows []apiRow
		for _, r := range apiRows(o) {
			if r.scale {
				rows = append(rows, r)
			}
		}
		apiTable(&b, rows, one)
		fmt.Fprintf(&b, "\nkiln-apiserver memory (RSS) holding them: %s once its cache had them all, %s after the load, peak %s.\n",
			mib(one, func(r *apiResult) int64 { return r.idleRSS }).String(" MiB", 0),
			mib(one, func(r *apiResult) int64 { return r.loadedRSS }).String(" MiB", 0),
			mib(one, func(r *apiResult) int64 { return r.peakRSS }).String(" MiB", 0))
		fmt.Fprintf(&b, "Failed calls during the loads: %s.\n", failedCalls(one))
	}
	return saveReport(o.Report, b.String())
}
