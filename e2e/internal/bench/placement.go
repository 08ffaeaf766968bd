package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/internal/stats"
)

// PlacementOptions shape the placement benchmark: gang-scheduled TrainJobs (a runtime with
// podGroupPolicy.coscheduling) queued in Kueue onto the KWOK fleet's topology-aware pool,
// once on a flavor without a Topology and once on the pool's Topology with one rack
// required, on one fresh local platform (Kiln only: what is measured is Kueue's and the
// scheduler's, with Kiln's rendering in between).
type PlacementOptions struct {
	Root string
	// Runs of both variants, in alternating order.
	Runs int
	// Jobs per variant and run, of Nodes pods of one whole node each, whose pods run PodRun.
	Jobs   int
	Nodes  int32
	PodRun time.Duration
	// The pool: Blocks × RacksPerBlock × NodesPerRack nodes.
	Blocks, RacksPerBlock, NodesPerRack int
	Report                              string
	Out                                 io.Writer
}

// DefaultPlacementOptions are what `make bench-placement` runs.
func DefaultPlacementOptions(root string) PlacementOptions {
	o := PlacementOptions{Root: root, Runs: 3, Jobs: 100, Nodes: 2, PodRun: 5 * time.Second, Blocks: 2, RacksPerBlock: 4, NodesPerRack: 4, Out: os.Stdout}
	if root != "" {
		o.Report = filepath.Join(root, "docs", "benchmarks-placement.md")
	}
	return o
}

// placementVariants: gang scheduling alone, then with Kueue's TAS requiring one rack.
var placementVariants = []struct{ name, slug string }{{"gang", "gang"}, {"gang + TAS (one rack required)", "tas"}}

// placementRun is one variant's figures in one run.
type placementRun struct {
	Variant string
	// Lags are, per job, from its Workload seen admitted to the last of its pods seen bound;
	// Unsuspended, Resumed, Created to the TrainJob seen unsuspended (by Kueue), its JobSet
	// seen running and the last of its pods seen at all.
	Lags, Unsuspended, Resumed, Created []time.Duration
	// Makespan is from the first create to the last job's pods all bound.
	Makespan time.Duration
	// Spread are the jobs whose pods were bound in more than one rack; Unbound those never
	// bound whole.
	Spread, Unbound int
}

// RunPlacement runs the placement benchmark and writes its report.
func RunPlacement(ctx context.Context, o PlacementOptions) error {
	if o.Runs < 1 || o.Jobs < 1 || o.Nodes < 1 || o.Blocks < 1 || o.RacksPerBlock < 1 || int(o.Nodes) > o.NodesPerRack {
		return fmt.Errorf("placement: want at least 1 run, job, node and rack, and no more nodes per job (%d) than a rack has (%d)", o.Nodes, o.NodesPerRack)
	}
	started := time.Now()
	bo := DefaultOptions(o.Root)
	bo.Out = o.Out
	fmt.Fprintln(o.Out, "placement: kiln on a fresh platform")
	e, stop, err := start(ctx, bo, platform.TrainerKiln, "placement", false, func(c *platform.Config) {
		c.TASBlocks, c.TASRacksPerBlock, c.TASNodesPerRack = o.Blocks, o.RacksPerBlock, o.NodesPerRack
	})
	if err != nil {
		return err
	}
	defer stop()
	rec := newBindRecorder()
	inf, err := e.cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(platform.EventHandlers(rec.onPod)); err != nil {
		return err
	}
	if err := e.plainFlavor(ctx); err != nil {
		return err
	}
	var results []placementRun
	for run := 1; run <= o.Runs; run++ {
		variants := placementVariants
		if run%2 == 0 {
			variants = reversed(variants)
		}
		for _, v := range variants {
			begin := time.Now()
			res, err := e.placement(ctx, o, rec, v.slug, run)
			if err != nil {
				return fmt.Errorf("placement, %s, run %d: %w", v.name, run, err)
			}
			res.Variant = v.name
			results = append(results, res)
			e.logf("placement %s, run %d: %d jobs bound, admission to all pods bound p50 %s p99 %s, last bound after %s; %d spread over racks, %d never bound (%s)",
				v.name, run, len(res.Lags), stats.Percentile(res.Lags, 50), stats.Percentile(res.Lags, 99), res.Makespan.Round(100*time.Millisecond), res.Spread, res.Unbound,
				time.Since(begin).Round(time.Second))
		}
	}
	return writePlacementReport(o, e.p.Config, results, started, time.Since(started))
}

// plainFlavor is a ResourceFlavor over the topology-aware pool's nodes without its Topology.
const plainFlavor = "bench-gpu-tas-plain"

func (e *env) plainFlavor(ctx context.Context) error {
	return e.poolFlavor(ctx, plainFlavor, platform.NodePoolTAS, platform.LabelNodePool)
}

// poolFlavor creates ResourceFlavor name over the nodes of pool, tolerating their
// NoSchedule taint taintKey=pool (an existing one is kept).
func (e *env) poolFlavor(ctx context.Context, name, pool, taintKey string) error {
	rf := platform.UnstructuredOf(platform.WorkloadGVK.GroupVersion().WithKind("ResourceFlavor"))
	rf.SetName(name)
	rf.Object["spec"] = map[string]any{
		"nodeLabels":  map[string]any{platform.LabelNodePool: pool},
		"tolerations": []any{map[string]any{"key": taintKey, "operator": "Equal", "value": pool, "effect": "NoSchedule"}},
	}
	if err := e.c.Create(ctx, rf); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ResourceFlavor %s: %w", name, err)
	}
	return nil
}

// placement submits o.Jobs gang jobs at once to a ClusterQueue of their own holding the whole
// pool's GPUs, on the pool's Topology (slug "tas", one rack required) or the plain flavor,
// and waits until every one finished.
func (e *env) placement(ctx context.Context, o PlacementOptions, rec *bindRecorder, slug string, run int) (placementRun, error) {
	var res placementRun
	ns := fmt.Sprintf("bench-place-%s-%d", slug, run)
	if err := e.namespace(ctx, ns); err != nil {
		return res, err
	}
	rt := &trainer.ClusterTrainingRuntime{}
	if err := e.c.Get(ctx, client.ObjectKey{Name: "torch-distributed"}, rt); err != nil {
		return res, fmt.Errorf("reading the torch-distributed runtime: %w", err)
	}
	spec := rt.Spec.DeepCopy()
	spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{
		Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](30)},
	}}
	if err := e.c.Create(ctx, &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gang"}, Spec: *spec}); err != nil {
		return res, err
	}
	cfg := e.p.Config
	flavor := plainFlavor
	if slug == "tas" {
		flavor = platform.FlavorTAS
	}
	gpus := resource.NewQuantity(int64(cfg.TASNodes()*cfg.GPUsPerNode), resource.DecimalSI)
	cq := platform.UnstructuredOf(platform.WorkloadGVK.GroupVersion().WithKind("ClusterQueue"))
	cq.SetName(ns)
	cq.Object["spec"] = map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: ns}},
		"resourceGroups": []any{map[string]any{
			"coveredResources": []any{string(gpu)},
			"flavors":          []any{map[string]any{"name": flavor, "resources": []any{map[string]any{"name": string(gpu), "nominalQuota": gpus.String()}}}},
		}},
	}
	lq := platform.UnstructuredOf(platform.WorkloadGVK.GroupVersion().WithKind("LocalQueue"))
	lq.SetNamespace(ns)
	lq.SetName("gangs")
	_ = unstructured.SetNestedField(lq.Object, ns, "spec", "clusterQueue")
	for _, obj := range []client.Object{cq, lq} {
		if err := e.c.Create(ctx, obj); err != nil {
			return res, fmt.Errorf("creating %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	annotations := map[string]string{platform.AnnotationSimDuration: o.PodRun.String()}
	if slug == "tas" {
		annotations[kueue.AnnotationRequiredTopology] = platform.LabelTopologyRack
	}
	perNode := resource.NewQuantity(int64(cfg.GPUsPerNode), resource.DecimalSI)
	start := time.Now()
	if err := createMany(ctx, e.c, o.Jobs, func(i int) client.Object {
		tj := benchJob(ns, fmt.Sprintf("gang-%03d", i), false, "")
		tj.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "gangs"}
		tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: "gang", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)}
		tj.Spec.Trainer.NumNodes = ptr.To(o.Nodes)
		tj.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: *perNode}, Limits: corev1.ResourceList{gpu: *perNode}}
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{platform.SimulatedPods(simManager, "node", annotations)}
		return tj
	}); err != nil {
		return res, err
	}
	if err := waitFor(ctx, 20*time.Minute, "every gang job to finish", func() (bool, string) {
		got := e.tracker.count(e.tracker.finishedSeen, ns)
		return got == o.Jobs, fmt.Sprintf("%d of %d finished", got, o.Jobs)
	}); err != nil {
		return res, err
	}
	racks, err := e.nodeRacks(ctx)
	if err != nil {
		return res, err
	}
	var last time.Time
	for i := range o.Jobs {
		k := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("gang-%03d", i)}
		bound, nodes, ok := rec.allBound(k, int(o.Nodes))
		admitted, admittedOK := e.tracker.admittedAt(k)
		if !ok || !admittedOK {
			res.Unbound++
			continue
		}
		res.Lags = append(res.Lags, bound.Sub(admitted))
		if created, ok := rec.allCreated(k, int(o.Nodes)); ok {
			res.Created = append(res.Created, created.Sub(admitted))
		}
		if unsuspended, ok := e.tracker.at(e.tracker.resumedSeen, k); ok {
			res.Unsuspended = append(res.Unsuspended, unsuspended.Sub(admitted))
		}
		if resumed, ok := e.tracker.jobSetResumedAt(k); ok {
			res.Resumed = append(res.Resumed, resumed.Sub(admitted))
		}
		if bound.After(last) {
			last = bound
		}
		seen := map[string]bool{}
		for _, n := range nodes {
			seen[racks[n]] = true
		}
		if len(seen) > 1 {
			res.Spread++
		}
	}
	res.Makespan = last.Sub(start)
	// The next variant gets the pool to itself: its ClusterQueue goes, and with the
	// namespace the finished jobs.
	if err := e.c.Delete(ctx, cq); err != nil {
		return res, err
	}
	return res, e.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}

// nodeRacks maps every node to its rack label.
func (e *env) nodeRacks(ctx context.Context) (map[string]string, error) {
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := e.c.List(ctx, nodes); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels[platform.LabelTopologyRack]
	}
	return out, nil
}

// bindRecorder records, from the bench's pod watch, when each pod of each JobSet was first
// seen, first seen bound to a node (and to which), and first seen running.
type bindRecorder struct {
	mu                      sync.Mutex
	created, bound, running map[types.NamespacedName]map[string]time.Time
	nodes                   map[types.NamespacedName]map[string]string
}

func newBindRecorder() *bindRecorder {
	return &bindRecorder{created: map[types.NamespacedName]map[string]time.Time{}, bound: map[types.NamespacedName]map[string]time.Time{},
		running: map[types.NamespacedName]map[string]time.Time{}, nodes: map[types.NamespacedName]map[string]string{}}
}

func (r *bindRecorder) onPod(obj any, deleted bool) {
	now := time.Now()
	p, ok := obj.(*corev1.Pod)
	if !ok || deleted {
		return
	}
	job := p.Labels[jobsetv1alpha2.JobSetNameKey]
	if job == "" {
		return
	}
	k := types.NamespacedName{Namespace: p.Namespace, Name: job}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bound[k] == nil {
		r.created[k], r.bound[k], r.running[k], r.nodes[k] = map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}, map[string]string{}
	}
	if _, seen := r.created[k][p.Name]; !seen {
		r.created[k][p.Name] = now
	}
	if _, seen := r.bound[k][p.Name]; !seen && p.Spec.NodeName != "" {
		r.bound[k][p.Name], r.nodes[k][p.Name] = now, p.Spec.NodeName
	}
	if _, seen := r.running[k][p.Name]; !seen && p.Status.Phase == corev1.PodRunning {
		r.running[k][p.Name] = now
	}
}

// allCreated is when the n-th pod of job k was first seen.
func (r *bindRecorder) allCreated(k types.NamespacedName, n int) (time.Time, bool) {
	return r.nth(r.created, k, n)
}

// allRunning is when the n-th pod of job k was first seen running.
func (r *bindRecorder) allRunning(k types.NamespacedName, n int) (time.Time, bool) {
	return r.nth(r.running, k, n)
}

// nth is the n-th earliest instant recorded in m for job k.
func (r *bindRecorder) nth(m map[types.NamespacedName]map[string]time.Time, k types.NamespacedName, n int) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(m[k]) < n {
		return time.Time{}, false
	}
	ts := make([]time.Time, 0, len(m[k]))
	for _, t := range m[k] {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, time.Time.Compare)
	return ts[n-1], true
}

// allBound is when the last of the first n pods of job k was seen bound, and their nodes.
func (r *bindRecorder) allBound(k types.NamespacedName, n int) (time.Time, []string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bound[k]) < n {
		return time.Time{}, nil, false
	}
	type b struct {
		at   time.Time
		node string
	}
	var all []b
	for name, at := range r.bound[k] {
		all = append(all, b{at, r.nodes[k][name]})
	}
	slices.SortFunc(all, func(x, y b) int { return x.at.Compare(y.at) })
	nodes := make([]string, 0, n)
	for _, x := range all[:n] {
		nodes = append(nodes, x.node)
	}
	return all[n-1].at, nodes, true
}

func writePlacementReport(o PlacementOptions, cfg platform.Config, results []placementRun, started time.Time, took time.Duration) error {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Benchmarks: gang scheduling and topology-aware placement")
	w("")
	w("%s", generatedBy("bench-placement", started, took))
	w("")
	w("Kiln on one fresh local platform (the one `make up` starts; kube-scheduler v1.36.3 with scheduler-plugins'")
	w("coscheduling, Kueue v0.19.0, JobSet v0.12.0), its topology-aware KWOK pool sized %d blocks × %d racks × %d nodes of", o.Blocks, o.RacksPerBlock, o.NodesPerRack)
	w("%d GPUs. Each run submits %d TrainJobs at once, each of %d pods of one whole node (%d GPUs), on a TrainingRuntime", cfg.GPUsPerNode, o.Jobs, o.Nodes, cfg.GPUsPerNode)
	w("with `podGroupPolicy.coscheduling` (a gang: no pod is bound until all are), whose pods run %s, to a Kueue", o.PodRun)
	w("ClusterQueue of their own holding the pool's %d GPUs: Kueue admits them in waves as others finish. *gang*: the", cfg.TASNodes()*cfg.GPUsPerNode)
	w("ClusterQueue's flavor selects the pool's nodes without a Topology; *gang + TAS*: the flavor has the pool's")
	w("Topology and every job requires one rack (`kueue.x-k8s.io/podset-required-topology`). The figure is, per job,")
	w("from its Workload seen Admitted to the last of its pods seen bound (the bench's watches); each cell is the median")
	w("over %d runs (min–max), the variants' order alternating.", o.Runs)
	w("")
	w("| figure | %s | %s |", placementVariants[0].name, placementVariants[1].name)
	w("|---|---|---|")
	cell := func(variant string, f func(placementRun) float64, unit string, decimals int) string {
		var vs []float64
		for _, r := range results {
			if r.Variant == variant {
				vs = append(vs, f(r))
			}
		}
		return spreadOfValues(vs).String(unit, decimals)
	}
	row := func(name string, f func(placementRun) float64, unit string, decimals int) {
		w("| %s | %s | %s |", name, cell(placementVariants[0].name, f, unit, decimals), cell(placementVariants[1].name, f, unit, decimals))
	}
	ms := func(p float64) func(placementRun) float64 {
		return func(r placementRun) float64 { return float64(stats.Percentile(r.Lags, p).Milliseconds()) }
	}
	row(fmt.Sprintf("Admission to all pods bound, p50 (%d gang jobs)", o.Jobs), ms(50), " ms", 0)
	row("Admission to all pods bound, p90", ms(90), " ms", 0)
	row("Admission to all pods bound, p99", ms(99), " ms", 0)
	of := func(p float64, pick func(placementRun) []time.Duration) func(placementRun) float64 {
		return func(r placementRun) float64 { return float64(stats.Percentile(pick(r), p).Milliseconds()) }
	}
	unsuspended := func(r placementRun) []time.Duration { return r.Unsuspended }
	resumed := func(r placementRun) []time.Duration { return r.Resumed }
	created := func(r placementRun) []time.Duration { return r.Created }
	for _, p := range []float64{50, 90} {
		row(fmt.Sprintf("… of which admission to the TrainJob unsuspended (Kueue), p%g", p), of(p, unsuspended), " ms", 0)
		row(fmt.Sprintf("… to its JobSet running (Kiln), p%g", p), of(p, resumed), " ms", 0)
		row(fmt.Sprintf("… to the last pod created (JobSet's and the Job controller's), p%g", p), of(p, created), " ms", 0)
	}
	row(fmt.Sprintf("First submit to the last job's pods all bound (%d jobs in waves)", o.Jobs), func(r placementRun) float64 { return r.Makespan.Seconds() }, " s", 1)
	row("Jobs whose pods were bound in more than one rack", func(r placementRun) float64 { return float64(r.Spread) }, "", 0)
	row("Jobs never bound whole", func(r placementRun) float64 { return float64(r.Unbound) }, "", 0)
	w("")
	w("What the time is: Kueue admits (with TAS, it also picks the rack and hosts), Kiln resumes the JobSet and JobSet")
	w("creates the pods; with TAS, Kueue's ungater then lifts each pod's `kueue.x-k8s.io/topology` gate onto its")
	w("assigned host; the scheduler holds each pod at Permit until its whole gang is reserved, then binds them all.")
	w("`docs/placement.md` tells when to use which.")
	return saveReport(o.Report, b.String())
}
