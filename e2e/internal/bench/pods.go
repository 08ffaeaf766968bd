package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/internal/platform/realnode"
	"github.com/kiln-ml/kiln/e2e/internal/stats"
)

// PodsOptions shape the real-pod benchmark: 2-node torch TrainJobs whose pods run real
// PyTorch (DistributedDataParallel over gloo, torchrun) on the local platform's real node,
// one job at a time, submitted directly and through a Kueue queue, with Kiln's operator
// and with upstream's controller in turn, each on a fresh platform, the image cached on the
// node. What is timed is the user's wait: from the create call to every pod running and to
// every rank's first line of training output.
type PodsOptions struct {
	Root     string
	Trainers []platform.Trainer
	// Variants are the slugs of podsVariants to run, in order (default: direct and kueue).
	Variants []string
	// Jobs per variant and controller, after one warm-up job that is not counted.
	Jobs   int
	Report string
	Out    io.Writer
}

// DefaultPodsOptions are what `make bench-pods` runs.
func DefaultPodsOptions(root string) PodsOptions {
	o := PodsOptions{Root: root, Trainers: []platform.Trainer{platform.TrainerKiln, platform.TrainerUpstream}, Variants: []string{"direct", "kueue"}, Jobs: 20, Out: os.Stdout}
	if root != "" {
		o.Report = filepath.Join(root, "docs", "benchmarks-pods.md")
	}
	return o
}

// podsVariants: submitted straight to the controller, queued in Kueue (admitted at once: the
// queue's quota holds a job), and the same training as a Python function, submitted straight
// with the command the Python SDK's CustomTrainer makes of it.
var podsVariants = []struct{ name, slug string }{{"direct", "direct"}, {"through Kueue", "kueue"}, {"function trainer", "function"}}

// podsNodes is the jobs' size: two pods of one torchrun process each.
const podsNodes = 2

// The training script's markers: each rank's worker prints the first when it starts (before
// importing torch), the second once every rank has joined the process group.
const (
	markerWorkerUp = "kiln-bench: worker up"
	markerTraining = "kiln-bench: training"
)

// podsScript trains a linear model with DistributedDataParallel over gloo for a few steps.
const podsScript = `cat > /tmp/train.py <<'EOF'
print("` + markerWorkerUp + `", flush=True)
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
print(f"` + markerTraining + ` rank {rank}/{world}", flush=True)
torch.manual_seed(0)
x = torch.randn(256, 8)
y = x @ torch.arange(1.0, 9.0).unsqueeze(1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(20):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print(f"rank {rank} done, loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
EOF
exec torchrun /tmp/train.py`

// podsFunction is podsScript's training as a Kubeflow SDK user writes it: a function.
const podsFunction = `def bench_train():
    print("` + markerWorkerUp + `", flush=True)
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"` + markerTraining + ` rank {rank}/{world}", flush=True)
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = x @ torch.arange(1.0, 9.0).unsqueeze(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(20):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print(f"rank {rank} done, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()
`

// functionCommand is the trainer command the Python SDK (sdk-gen/python) makes of
// podsFunction on a torch runtime, and how long making it took the SDK.
func functionCommand(ctx context.Context, root string) ([]string, time.Duration, error) {
	dir, err := os.MkdirTemp("", "kiln-bench-function-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "bench_train.py"), []byte(podsFunction), 0o644); err != nil {
		return nil, 0, err
	}
	const program = `import json, sys, time, types
import bench_train
from kiln._function import trainer_command
start = time.perf_counter()
command, args = trainer_command(types.SimpleNamespace(func=bench_train.bench_train, func_args=None, packages_to_install=None, pip_index_urls=None), "torch")
print(json.dumps({"command": command + args, "seconds": time.perf_counter() - start}))
`
	cmd := exec.CommandContext(ctx, "python3", "-c", program)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir+string(os.PathListSeparator)+filepath.Join(root, "sdk-gen", "python"))
	out, err := cmd.Output()
	if err != nil {
		return nil, 0, fmt.Errorf("the Python SDK's trainer_command: %w", err)
	}
	var got struct {
		Command []string `json:"command"`
		Seconds float64  `json:"seconds"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, 0, fmt.Errorf("the Python SDK's trainer_command printed %q: %w", out, err)
	}
	return got.Command, time.Duration(got.Seconds * float64(time.Second)), nil
}

// podsRun is one controller's figures for one variant: per job, the time from the create
// call to each stage (a stage a variant does not have stays empty).
type podsRun struct {
	Trainer, Variant string
	// JobSet seen; the Workload seen admitted and the TrainJob seen unsuspended (Kueue
	// variant); the JobSet seen running; every pod seen created, bound, running; every
	// rank's worker up and training (from the container's log timestamps).
	JobSet, Admitted, Unsuspended, Resumed, Created, Bound, Running, WorkerUp, Training []time.Duration
	// Prepared is how long the Python SDK took to make the function trainer's command, of
	// CommandBytes (function variant).
	Prepared     time.Duration
	CommandBytes int
}

// podsStage is a row of the report: a stage and where podsRun keeps it.
type podsStage struct {
	name string
	of   func(*podsRun) *[]time.Duration
}

var podsStages = []podsStage{
	{"JobSet created (suspended when queued)", func(r *podsRun) *[]time.Duration { return &r.JobSet }},
	{"Workload admitted (Kueue)", func(r *podsRun) *[]time.Duration { return &r.Admitted }},
	{"TrainJob unsuspended (Kueue)", func(r *podsRun) *[]time.Duration { return &r.Unsuspended }},
	{"JobSet running", func(r *podsRun) *[]time.Duration { return &r.Resumed }},
	{"every pod created (JobSet, Job controller)", func(r *podsRun) *[]time.Duration { return &r.Created }},
	{"every pod bound (scheduler)", func(r *podsRun) *[]time.Duration { return &r.Bound }},
	{"every pod running (kubelet, containerd)", func(r *podsRun) *[]time.Duration { return &r.Running }},
	{"every rank's worker up (torchrun started it)", func(r *podsRun) *[]time.Duration { return &r.WorkerUp }},
	{"every rank training (torch imported, rendezvous done)", func(r *podsRun) *[]time.Duration { return &r.Training }},
}

// RunPods runs the real-pod benchmark and writes its report.
func RunPods(ctx context.Context, o PodsOptions) error {
	if o.Jobs < 1 || len(o.Trainers) == 0 {
		return fmt.Errorf("pods: want at least 1 job and 1 controller")
	}
	started := time.Now()
	bo := DefaultOptions(o.Root)
	bo.Out = o.Out
	image, err := realnode.ArchiveRef(filepath.Join(o.Root, "bin", "images", "torch-cpu.tar"))
	if err != nil {
		return fmt.Errorf("the real node's torch image (make node-images): %w", err)
	}
	var results []*podsRun
	for _, tr := range o.Trainers {
		fmt.Fprintf(o.Out, "pods: %s on a fresh platform with the real node\n", tr)
		runs, err := runPods(ctx, o, bo, tr, image)
		if err != nil {
			return fmt.Errorf("pods, %s: %w", tr, err)
		}
		results = append(results, runs...)
	}
	return writePodsReport(o, results, image, started, time.Since(started))
}

func runPods(ctx context.Context, o PodsOptions, bo Options, tr platform.Trainer, image string) ([]*podsRun, error) {
	e, stop, err := start(ctx, bo, tr, "pods", false, func(c *platform.Config) { c.RealNodes = 1 })
	if err != nil {
		return nil, err
	}
	defer stop()
	rec := newBindRecorder()
	inf, err := e.cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(platform.EventHandlers(rec.onPod)); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(e.cfg)
	if err != nil {
		return nil, err
	}
	if err := e.realQueue(ctx); err != nil {
		return nil, err
	}
	var out []*podsRun
	for vi, v := range selectedVariants(o.Variants) {
		ns := "bench-pods-" + v.slug
		res := &podsRun{Trainer: string(tr), Variant: v.name}
		command := []string{"sh", "-c", podsScript}
		if v.slug == "function" {
			fn, took, err := functionCommand(ctx, o.Root)
			if err != nil {
				return nil, err
			}
			command, res.Prepared, res.CommandBytes = fn, took, len(strings.Join(fn, " "))
			e.logf("pods: the Python SDK made the function's command (%d bytes) in %s", res.CommandBytes, took)
		}
		if err := e.namespace(ctx, ns); err != nil {
			return nil, err
		}
		if v.slug == "kueue" {
			if err := e.localQueue(ctx, ns, realQueueName, realQueueName); err != nil {
				return nil, err
			}
		}
		// One warm-up job on the first variant: the first start of the image on a fresh node
		// reads its files from disk, and that is not what a user waits for every time.
		first := 0
		if vi == 0 {
			first = -1
		}
		for i := first; i < o.Jobs; i++ {
			name := fmt.Sprintf("ddp-%02d", i+1)
			if i < 0 {
				name = "warm-up"
			}
			begin := time.Now()
			stages, err := e.realPodsJob(ctx, cs, rec, ns, name, image, command, v.slug == "kueue")
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", v.name, name, err)
			}
			if i < 0 {
				e.logf("pods: warm-up done in %s", time.Since(begin).Round(100*time.Millisecond))
				continue
			}
			for si, s := range podsStages {
				if d, ok := stages[si]; ok {
					*s.of(res) = append(*s.of(res), d)
				}
			}
		}
		e.logf("pods %s: %d jobs, every pod running p50 %s p99 %s, every rank training p50 %s p99 %s", v.name, len(res.Training),
			stats.Percentile(res.Running, 50), stats.Percentile(res.Running, 99), stats.Percentile(res.Training, 50), stats.Percentile(res.Training, 99))
		out = append(out, res)
	}
	return out, nil
}

// podsVariantText says what each variant does, in the report.
var podsVariantText = map[string]string{
	"direct": "*direct*: the TrainJob runs at once, its command a shell script that writes the training script and runs `torchrun` on it.",
	"kueue":  "*through Kueue*: it is queued in a LocalQueue whose ClusterQueue holds the node's CPUs, and admitted at once.",
	"function": "*function trainer*: the same training as a Python function, submitted directly with the command the Python SDK's " +
		"`CustomTrainer(func=...)` makes of it (the function's source written to a file, then `torchrun` on it).",
}

// selectedVariants are the podsVariants of slugs, in their order (none: direct and kueue).
func selectedVariants(slugs []string) []struct{ name, slug string } {
	if len(slugs) == 0 {
		slugs = []string{"direct", "kueue"}
	}
	var out []struct{ name, slug string }
	for _, v := range podsVariants {
		if slices.Contains(slugs, v.slug) {
			out = append(out, v)
		}
	}
	return out
}

// realQueueName names the real node's ResourceFlavor, ClusterQueue and LocalQueue.
const realQueueName = "bench-real"

// realQueue is a ResourceFlavor over the real node and a ClusterQueue holding its CPUs.
func (e *env) realQueue(ctx context.Context) error {
	if err := e.poolFlavor(ctx, realQueueName, platform.NodePoolReal, platform.TaintRealNode); err != nil {
		return err
	}
	cq := platform.UnstructuredOf(platform.WorkloadGVK.GroupVersion().WithKind("ClusterQueue"))
	cq.SetName(realQueueName)
	cq.Object["spec"] = map[string]any{
		"namespaceSelector": map[string]any{},
		"resourceGroups": []any{map[string]any{
			"coveredResources": []any{string(corev1.ResourceCPU), string(corev1.ResourceMemory)},
			"flavors": []any{map[string]any{"name": realQueueName, "resources": []any{
				map[string]any{"name": string(corev1.ResourceCPU), "nominalQuota": "2"},
				map[string]any{"name": string(corev1.ResourceMemory), "nominalQuota": "4Gi"},
			}}},
		}},
	}
	if err := e.c.Create(ctx, cq); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterQueue %s: %w", realQueueName, err)
	}
	return nil
}

// localQueue creates LocalQueue name in ns, onto ClusterQueue cq.
func (e *env) localQueue(ctx context.Context, ns, name, cq string) error {
	lq := platform.UnstructuredOf(platform.WorkloadGVK.GroupVersion().WithKind("LocalQueue"))
	lq.SetNamespace(ns)
	lq.SetName(name)
	_ = unstructured.SetNestedField(lq.Object, cq, "spec", "clusterQueue")
	if err := e.c.Create(ctx, lq); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating LocalQueue %s/%s: %w", ns, name, err)
	}
	return nil
}

// podsJob is a 2-node torch TrainJob on the torch-distributed runtime whose pods run
// command (podsScript, or the function trainer's) in image on the real node.
func podsJob(ns, name, image string, command []string, queued bool) *trainer.TrainJob {
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
			Trainer: &trainer.Trainer{
				Image: ptr.To(image), Command: command,
				NumNodes: ptr.To[int32](podsNodes), NumProcPerNode: ptr.To[int32](1),
				ResourcesPerNode: &corev1.ResourceRequirements{Requests: requests},
			},
			RuntimePatches: []trainer.RuntimePatch{{
				Manager: "bench.kiln.dev/real-node",
				TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
					Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{
						Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
							NodeSelector: map[string]string{platform.LabelNodePool: platform.NodePoolReal},
							Tolerations: []corev1.Toleration{{
								Key: platform.TaintRealNode, Operator: corev1.TolerationOpEqual, Value: platform.NodePoolReal, Effect: corev1.TaintEffectNoSchedule,
							}},
						}}},
					}}}},
				}},
			}},
		},
	}
	if queued {
		tj.Labels = map[string]string{"kueue.x-k8s.io/queue-name": realQueueName}
	}
	return tj
}

// realPodsJob creates one TrainJob, waits until it completes, reads every rank's log, then
// deletes it and waits until its pods are gone (the next job gets the node to itself). It
// returns, by index into podsStages, the time from the create call to each stage seen.
func (e *env) realPodsJob(ctx context.Context, cs kubernetes.Interface, rec *bindRecorder, ns, name, image string, command []string, queued bool) (map[int]time.Duration, error) {
	k := types.NamespacedName{Namespace: ns, Name: name}
	tj := podsJob(ns, name, image, command, queued)
	created := time.Now()
	if err := e.c.Create(ctx, tj); err != nil {
		return nil, fmt.Errorf("creating it: %w", err)
	}
	if err := waitFor(ctx, 5*time.Minute, "TrainJob "+k.String()+" to finish", func() (bool, string) {
		_, ok := e.tracker.at(e.tracker.finishedSeen, k)
		return ok, "not finished"
	}); err != nil {
		return nil, err
	}
	if err := e.c.Get(ctx, k, tj); err != nil {
		return nil, err
	}
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed); c != nil && c.Status == metav1.ConditionTrue {
		return nil, fmt.Errorf("the TrainJob failed: %s: %s", c.Reason, c.Message)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: jobsetv1alpha2.JobSetNameKey + "=" + name})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) != podsNodes {
		return nil, fmt.Errorf("%d pods, want %d", len(pods.Items), podsNodes)
	}
	stages := map[int]time.Duration{}
	since := func(si int) func(time.Time, bool) {
		return func(at time.Time, ok bool) {
			if ok {
				stages[si] = at.Sub(created)
			}
		}
	}
	since(0)(e.tracker.at(e.tracker.jobSetSeen, k))
	if queued {
		since(1)(e.tracker.admittedAt(k))
		since(2)(e.tracker.at(e.tracker.resumedSeen, k))
	}
	since(3)(e.tracker.jobSetResumedAt(k))
	since(4)(rec.allCreated(k, podsNodes))
	bound, _, ok := rec.allBound(k, podsNodes)
	since(5)(bound, ok)
	since(6)(rec.allRunning(k, podsNodes))
	var up, training time.Time
	for _, p := range pods.Items {
		raw, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Timestamps: true}).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading pod %s's log: %w", p.Name, err)
		}
		u, err := loggedAt(raw, markerWorkerUp)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		t, err := loggedAt(raw, markerTraining)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		up, training = later(up, u), later(training, t)
	}
	since(7)(up, true)
	since(8)(training, true)
	if err := e.c.Delete(ctx, tj); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return stages, waitFor(ctx, 2*time.Minute, "the pods of "+k.String()+" to be deleted", func() (bool, string) {
		left, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: jobsetv1alpha2.JobSetNameKey + "=" + name})
		if err != nil {
			return false, err.Error()
		}
		return len(left.Items) == 0, fmt.Sprintf("%d pods left", len(left.Items))
	})
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// loggedAt is the timestamp of the first line of a log read with timestamps (RFC 3339 with
// nanoseconds, then a space, then the line) that contains marker.
func loggedAt(log []byte, marker string) (time.Time, error) {
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ts, line, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.Contains(line, marker) {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return time.Time{}, fmt.Errorf("the log line %q has no timestamp: %w", sc.Text(), err)
		}
		return at, nil
	}
	return time.Time{}, fmt.Errorf("no line of its log says %q; the log:\n%s", marker, log)
}

func writePodsReport(o PodsOptions, results []*podsRun, image string, started time.Time, took time.Duration) error {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Benchmarks: real pods")
	w("")
	target := "bench-pods"
	if slices.Contains(o.Variants, "function") && !slices.Contains(o.Variants, "kueue") {
		target = "bench-function"
	}
	w("%s", generatedBy(target, started, took))
	w("")
	w("What a user waits for on real pods: %d TrainJobs per column, one at a time, each of %d pods of one `torchrun`", o.Jobs, podsNodes)
	w("process on the torch-distributed runtime, running DistributedDataParallel over gloo in `%s` on the local", image)
	w("platform's real node (`kiln-node-0`: kubelet, containerd and runc on this machine; the image imported at the start,")
	if len(o.Trainers) > 1 {
		w("so cached; [real-node.md](real-node.md)). Kiln's operator and upstream Kubeflow Trainer v2.3's controller each on a")
		w("fresh platform with the same client budget, after one warm-up job.")
	} else {
		w("so cached; [real-node.md](real-node.md)). %s's controller on a fresh platform, after one warm-up job.", o.Trainers[0])
	}
	for _, v := range selectedVariants(o.Variants) {
		w("%s", podsVariantText[v.slug])
	}
	for _, r := range results {
		if r.Prepared > 0 {
			w("The Python SDK made the function trainer's command in %s (%d bytes), before the create call.", r.Prepared.Round(100*time.Microsecond), r.CommandBytes)
			break
		}
	}
	w("Each job is deleted, its pods gone, before the next is created.")
	w("")
	w("Each cell is the time from the create call to the stage, p50 / p99 over the jobs (ms): the JobSet and pods as the")
	w("bench's watches first saw them, the training's lines by the container log's timestamps (the same clock).")
	w("")
	header, sep := "| stage |", "|---|"
	var cols []*podsRun
	for _, v := range selectedVariants(o.Variants) {
		for _, tr := range o.Trainers {
			i := slices.IndexFunc(results, func(r *podsRun) bool { return r.Trainer == string(tr) && r.Variant == v.name })
			if i < 0 {
				continue
			}
			cols = append(cols, results[i])
			header += fmt.Sprintf(" %s, %s |", tr, v.name)
			sep += "---|"
		}
	}
	table := func(cell func(r *podsRun, si int) string) {
		w("%s", header)
		w("%s", sep)
		for si, s := range podsStages {
			row := "| " + s.name + " |"
			for _, r := range cols {
				if len(*s.of(r)) == 0 {
					row += " — |"
					continue
				}
				row += " " + cell(r, si) + " |"
			}
			w("%s", row)
		}
	}
	table(func(r *podsRun, si int) string {
		ds := *podsStages[si].of(r)
		return fmt.Sprintf("%d / %d", stats.Percentile(ds, 50).Milliseconds(), stats.Percentile(ds, 99).Milliseconds())
	})
	w("")
	w("Where the time goes, p50 of each stage's own part (ms; the difference of consecutive stages' medians):")
	w("")
	table(func(r *podsRun, si int) string {
		prev := time.Duration(0)
		for pi := si - 1; pi >= 0; pi-- {
			if ds := *podsStages[pi].of(r); len(ds) > 0 {
				prev = stats.Percentile(ds, 50)
				break
			}
		}
		return fmt.Sprint((stats.Percentile(*podsStages[si].of(r), 50) - prev).Milliseconds())
	})
	w("")
	w("The controllers' part is the first rows: create to the JobSet running (Kiln renders and applies it, upstream the")
	w("same; when queued, Kueue admits and unsuspends the TrainJob first, and the JobSet created suspended is resumed).")
	w("Everything after is the same components for both: JobSet and the Job controller create the pods, the scheduler")
	w("binds them, the kubelet starts the sandboxes and containers, `torchrun` starts its worker, the worker imports")
	w("torch and joins the process group (the rendezvous waits for the slower rank).")
	if len(o.Trainers) < 2 {
		return saveReport(o.Report, b.String())
	}
	w("")
	w("The jobs carry no `terminationGracePeriodSeconds`: with it in the runtime patch, upstream's controller never")
	w("resumed a queued job. Kueue v0.19 writes the TrainJob at admission with Trainer v2.2.1's Go types, which lack the")
	w("field, so the write drops it; upstream then updates the suspended JobSet with a pod template without it, and JobSet")
	w("refuses the update (`spec.replicatedJobs: field is immutable`) on every retry. Kiln's webhook keeps the other")
	w("managers' runtime patches as they were on Kueue's writes ([install.md](install.md)), so Kiln runs it.")
	return saveReport(o.Report, b.String())
}
