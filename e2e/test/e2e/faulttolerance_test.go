package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/test/framework"
	"github.com/kiln-ml/kiln/runtimes"
)

// The fault-tolerance story of docs/fault-tolerance.md on real processes: torchrun DDP over
// gloo in the real node's image, whose kiln.checkpoint helper is the Python SDK's.

// spotRuntime is the catalog's runtime for spot capacity.
const spotRuntime = "torch-distributed-spot"

// ftTrainScript trains a linear model with DDP for $STEPS steps of $STEP_SECONDS each,
// printing each step it trained; with $KILN_HELPER=0 it does without kiln.checkpoint (the
// control case: nothing saved, nothing resumed).
const ftTrainScript = `cat > /tmp/train.py <<'EOF'
import os, sys, time
import torch, torch.distributed as dist
distributed = "MASTER_ADDR" in os.environ
if distributed:
    dist.init_process_group("gloo")
rank = dist.get_rank() if distributed else 0
torch.manual_seed(0)
x = torch.randn(256, 8)
y = x @ torch.arange(1.0, 9.0).unsqueeze(1)
model = torch.nn.Linear(8, 1)
if distributed:
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total, pause = int(os.environ["STEPS"]), float(os.environ["STEP_SECONDS"])
ckpt = None
start = 0
if os.environ.get("KILN_HELPER", "1") == "1":
    from kiln.checkpoint import Checkpointer
    ckpt = Checkpointer()
    start = ckpt.resume(model=model, optimizer=opt)
for step in range(start, total):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    print(f"rank {rank} trained step {step + 1} loss {loss.item():.4f}", flush=True)
    time.sleep(pause)
    if ckpt:
        ckpt.step(step + 1, model=model, optimizer=opt)
print(f"rank {rank} finished at step {total}", flush=True)
if distributed:
    dist.destroy_process_group()
EOF
exec ${LAUNCH:-torchrun} /tmp/train.py`

// checkpointVolume gives namespace ns the PersistentVolumeClaim kiln-checkpoints the spot
// runtime mounts, as docs/fault-tolerance.md says to: ReadWriteMany, of the platform's
// default StorageClass (the real node's local-path provisioner), and waits until it is bound.
func checkpointVolume(ctx context.Context, ns string) {
	GinkgoHelper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "kiln-checkpoints", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	Expect(k8s.Create(ctx, pvc)).To(Succeed())
	Eventually(ctx, func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)).To(Succeed())
		g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound), "the local-path provisioner binds a claim of the default class")
	}).WithTimeout(time.Minute).Should(Succeed())
}

// spotJob is a TrainJob of runtime (the spot runtime or a copy of it) whose pods run
// ftTrainScript on the real node.
func spotJob(ns, name, runtime string, nodes int32, env map[string]string) *trainer.TrainJob {
	tj := realJob(ns, name, nodes, ftTrainScript)
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: runtime}
	if runtime != spotRuntime {
		tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
		tj.Spec.RuntimeRef.APIGroup = ptr.To(trainer.GroupVersion.Group)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		tj.Spec.Trainer.Env = append(tj.Spec.Trainer.Env, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return tj
}

// attemptPods waits for the n pods of restart attempt `attempt` of TrainJob name to run,
// and returns them by rank (their completion index).
func attemptPods(ctx context.Context, ns, name string, attempt, n int) []corev1.Pod {
	GinkgoHelper()
	var running []corev1.Pod
	Eventually(ctx, func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{
			"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/restart-attempt": strconv.Itoa(attempt),
		})).To(Succeed())
		running = nil
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		g.Expect(running).To(HaveLen(n))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	slices.SortFunc(running, func(a, b corev1.Pod) int {
		return strings.Compare(a.Labels["batch.kubernetes.io/job-completion-index"], b.Labels["batch.kubernetes.io/job-completion-index"])
	})
	return running
}

// trainedSteps are the steps a rank's log says it trained, in order.
func trainedSteps(log string, rank int) []int {
	var steps []int
	for _, m := range regexp.MustCompile(fmt.Sprintf(`(?m)^rank %d trained step (\d+) `, rank)).FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		steps = append(steps, n)
	}
	return steps
}

// lossAt is the loss a rank's log reports for step n (-1 when it does not).
func lossAt(log string, rank, n int) float64 {
	m := regexp.MustCompile(fmt.Sprintf(`(?m)^rank %d trained step %d loss ([0-9.]+)$`, rank, n)).FindStringSubmatch(log)
	if m == nil {
		return -1
	}
	loss, _ := strconv.ParseFloat(m[1], 64)
	return loss
}

// jobStory is what a failure message shows of TrainJob ns/name: its pods (attempt, phase,
// deletion), its restarts and conditions, and the namespace's events.
func jobStory(ctx context.Context, ns, name string) string {
	var b strings.Builder
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}); err != nil {
		fmt.Fprintf(&b, "listing %s's pods: %v\n", name, err)
	}
	fmt.Fprintf(&b, "%s's pods:\n", name)
	for _, p := range pods.Items {
		deleted := ""
		if p.DeletionTimestamp != nil {
			deleted = " deleted at " + p.DeletionTimestamp.Format(time.TimeOnly)
		}
		fmt.Fprintf(&b, "  %s attempt %s %s%s\n", p.Name, p.Labels["jobset.sigs.k8s.io/restart-attempt"], p.Status.Phase, deleted)
	}
	tj := &trainer.TrainJob{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
		fmt.Fprintf(&b, "getting %s: %v\n", name, err)
	} else {
		fmt.Fprintf(&b, "its restarts: %+v\nits conditions:\n", tj.Status.Restarts)
		for _, c := range tj.Status.Conditions {
			fmt.Fprintf(&b, "  %s %s %s %s: %s\n", c.LastTransitionTime.Format(time.TimeOnly), c.Type, c.Status, c.Reason, c.Message)
		}
	}
	fmt.Fprintf(&b, "events of %s:\n%s", ns, eventsOf(ctx, ns))
	return b.String()
}

// keptLogsOf is the last lines of every kept log of TrainJob ns/name, for a failure message:
// each attempt up to maxAttempt, each of its nodes (kiln logs --attempt N --step node-K).
func keptLogsOf(ns, name string, maxAttempt int) string {
	var b strings.Builder
	for attempt := 0; attempt <= maxAttempt; attempt++ {
		for node := 0; node < 2; node++ {
			out, errOut, code := kilnCLI("", "logs", name, "-n", ns, "--attempt", strconv.Itoa(attempt), "--step", fmt.Sprintf("node-%d", node), "--tail", "15")
			fmt.Fprintf(&b, "--- attempt %d, node-%d (exit %d):\n%s%s", attempt, node, code, out, errOut)
		}
	}
	return b.String()
}

// upTo is 1..n.
func upTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// evict asks for pod's eviction, as `kubectl drain` and a spot reclaim's node shutdown do:
// the pod gets the DisruptionTarget condition and SIGTERM.
func evict(ctx context.Context, pod corev1.Pod) {
	GinkgoHelper()
	Expect(clientset.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
	})).To(Succeed())
}

// runtimeCopy creates in ns a TrainingRuntime name that is the spot runtime with
// failurePolicy.maxRestarts set to maxRestarts, as a team tunes its own.
func runtimeCopy(ctx context.Context, ns, name string, maxRestarts int32) {
	GinkgoHelper()
	crt, err := runtimes.ClusterTrainingRuntime(spotRuntime)
	Expect(err).NotTo(HaveOccurred())
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: crt.Labels}, Spec: *crt.Spec.DeepCopy()}
	rt.Spec.Template.Spec.FailurePolicy.MaxRestarts = maxRestarts
	Expect(k8s.Create(ctx, rt)).To(Succeed())
}

func restartsOf(ctx context.Context, g Gomega, ns, name string) trainer.RestartsStatus {
	tj := getTrainJob(ctx, g, ns, name)
	g.Expect(tj.Status.Restarts).NotTo(BeNil(), "status.restarts of %s", name)
	return *tj.Status.Restarts
}

// faultToleranceSpecs train on the real node (see onTheRealNode).
func faultToleranceSpecs() {
	BeforeEach(func(ctx context.Context) { requireRealNode(ctx) })

	It("runs docs/fault-tolerance.md's local example as written: a claim of the default StorageClass, an eviction, an uncounted restart, every rank resuming, kept logs; slow: 60 steps of real DDP around an eviction", func(ctx context.Context) {
		root := os.Getenv("KILN_ROOT")
		if root == "" || os.Getenv("KILN_CONFIG") == "" {
			Skip("KILN_ROOT and KILN_CONFIG are not set: not on the local platform")
		}
		script := docScript(filepath.Join(root, "docs", "fault-tolerance.md"), "## Try it on this machine")
		const ns, claim = "ft-demo", "kiln-checkpoints"
		removeNamespace := func(ctx context.Context) {
			GinkgoHelper()
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			Eventually(ctx, func() bool {
				return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
			}).WithTimeout(2*time.Minute).Should(BeTrue(), "namespace %s is gone", ns)
		}
		removeNamespace(ctx) // what a run killed half way left
		DeferCleanup(func(ctx context.Context) {
			By("deleting the namespace, as the page says: the claim's volume and its directory go too")
			removeNamespace(ctx)
			volumes := filepath.Join(root, "bin", "platform", "node", "volumes")
			Eventually(ctx, func(g Gomega) {
				var pvs corev1.PersistentVolumeList
				g.Expect(k8s.List(ctx, &pvs)).To(Succeed())
				for _, pv := range pvs.Items {
					if ref := pv.Spec.ClaimRef; ref != nil {
						g.Expect(ref.Namespace).NotTo(Equal(ns), "volume %s of the deleted claim", pv.Name)
					}
				}
				dirs, err := filepath.Glob(filepath.Join(volumes, "*_"+ns+"_"+claim))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(dirs).To(BeEmpty())
			}).WithTimeout(time.Minute).Should(Succeed())
		})

		cmdCtx, cancel := context.WithTimeout(ctx, 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cmdCtx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = root
		started := time.Now()
		outBytes, err := cmd.CombinedOutput()
		out := string(outBytes)
		GinkgoWriter.Printf("--- the page's commands:\n%s", out)
		Expect(err).NotTo(HaveOccurred(), "the page's example failed:\n%s", out)
		AddReportEntry("docs/fault-tolerance.md's example, from the namespace to Complete", time.Since(started).Round(100*time.Millisecond).String())

		Expect(out).To(MatchRegexp(`local-path \(default\)\s+rancher.io/local-path\s+Delete\s+Immediate`))
		Expect(out).To(ContainSubstring("persistentvolumeclaim/kiln-checkpoints condition met"))
		Expect(out).To(ContainSubstring("trainjob ft-demo/spot-demo Complete (AllJobsCompleted)"))
		// A restart the page does not expect: its attempts' logs say why.
		attemptLogs := func() string { return keptLogsOf(ns, "spot-demo", 2) }
		Expect(out).To(MatchRegexp(`Restarts:\s+1 \(0 of maxRestarts 3 counted; disruptions do not count\), last: Disruption`), attemptLogs)
		Expect(out).To(MatchRegexp(`Kept logs:\s+attempts 0 `), attemptLogs)
		Expect(out).To(ContainSubstring("kiln.checkpoint: received SIGTERM; saving a checkpoint at the end of this step, then exiting with code 75"))
		stopped := regexp.MustCompile(`kiln.checkpoint: stopped after step (\d+); exiting with code 75`).FindStringSubmatch(out)
		Expect(stopped).NotTo(BeNil(), "the evicted rank's last words, from the kept log of attempt 0")
		step, _ := strconv.Atoi(stopped[1])
		Expect(step).To(BeNumerically(">=", 20), "evicted after the first periodic checkpoint")
		Expect(out).To(ContainSubstring(fmt.Sprintf("kiln.checkpoint: resuming from step %d (/kiln/checkpoints/step-%09d.ckpt)", step, step)))
		Expect(out).To(MatchRegexp(`rank 0 step 60 loss `))
	})

	It("survives losing a node: emergency checkpoint, group restart not counted, every rank resumes, exactly N steps", func(ctx context.Context) {
		const steps, interval = 60, 20
		ns := newNamespace(ctx, "ft-spot")
		checkpointVolume(ctx, ns)
		Expect(k8s.Create(ctx, spotJob(ns, "spot", spotRuntime, 2, map[string]string{
			"STEPS": strconv.Itoa(steps), "STEP_SECONDS": "0.5", "KILN_CHECKPOINT_INTERVAL": strconv.Itoa(interval),
		}))).To(Succeed())

		first := attemptPods(ctx, ns, "spot", 0, 2)
		logs := []*logStream{followLogs(ctx, ns, first[0].Name), followLogs(ctx, ns, first[1].Name)}
		// Past a periodic checkpoint and well before the next: the emergency one is the step
		// training stops at.
		Eventually(ctx, func() []int { return trainedSteps(logs[0].String(), 0) }).WithTimeout(3 * time.Minute).
			Should(ContainElement(interval + 3))

		By("evicting rank 1's pod, as a drain or a spot reclaim does")
		evictedAt := time.Now()
		evict(ctx, first[1])
		for _, l := range logs {
			Eventually(ctx, l.Done).WithTimeout(time.Minute).Should(BeClosed())
		}
		for rank, l := range logs {
			GinkgoWriter.Printf("--- rank %d, first attempt:\n%s", rank, l.String())
		}
		Expect(logs[1].String()).To(ContainSubstring("kiln.checkpoint: received SIGTERM"))
		saved := regexp.MustCompile(`kiln.checkpoint: saved step (\d+) `).FindAllStringSubmatch(logs[0].String(), -1)
		Expect(saved).NotTo(BeEmpty(), logs[0].String())
		stoppedAt, _ := strconv.Atoi(saved[len(saved)-1][1])
		Expect(stoppedAt).To(BeNumerically(">", interval+2), "the emergency checkpoint is of the step training stopped at:\n%s", logs[0].String())
		Expect(stoppedAt%interval).NotTo(BeZero(), "an emergency checkpoint, not a periodic one:\n%s", logs[0].String())
		for rank, l := range logs {
			Expect(trainedSteps(l.String(), rank)).To(Equal(upTo(stoppedAt)), "rank %d stopped at the step of the checkpoint:\n%s", rank, l.String())
			Expect(l.String()).To(ContainSubstring(fmt.Sprintf("stopped after step %d; exiting with code 75", stoppedAt)))
		}

		By("restarting the group, every rank resuming from the saved step")
		second := attemptPods(ctx, ns, "spot", 1, 2)
		AddReportEntry("from the eviction to the new pods running", time.Since(evictedAt).Round(100*time.Millisecond).String())
		waitConditionWithin(ctx, 4*time.Minute, ns, "spot", trainer.TrainJobComplete, metav1.ConditionTrue, "")
		for rank, p := range second {
			// A read the kubelet fails (the real node's log endpoint, on a loaded CI machine) is
			// read again; a pod gone (a further restart) is not there to read: its story says so.
			var out string
			Eventually(ctx, func() error {
				var err error
				out, err = kubectl("", "logs", "-n", ns, p.Name)
				if err != nil {
					return fmt.Errorf("kubectl logs %s: %w: %s", p.Name, err, out)
				}
				return nil
			}).WithTimeout(30*time.Second).Should(Succeed(), func() string { return jobStory(ctx, ns, "spot") })
			GinkgoWriter.Printf("--- rank %d, second attempt:\n%s", rank, out)
			Expect(out).To(ContainSubstring(fmt.Sprintf("kiln.checkpoint: resuming from step %d ", stoppedAt)))
			all := append(trainedSteps(logs[rank].String(), rank), trainedSteps(out, rank)...)
			Expect(all).To(Equal(upTo(steps)), "rank %d trained each of the %d steps once", rank, steps)
			// The model and optimizer state came back too: the loss goes on falling from where
			// it was (a fresh model would start again at step 1's loss).
			before, after := lossAt(logs[rank].String(), rank, stoppedAt), lossAt(out, rank, stoppedAt+1)
			Expect(before).To(BeNumerically(">", 0))
			Expect(after).To(And(BeNumerically(">", 0), BeNumerically("<", before)), "loss %v at step %d, then %v", before, stoppedAt, after)
		}

		By("counting the restart, not against the failure budget, and saying why")
		Eventually(ctx, func(g Gomega) {
			rs := restartsOf(ctx, g, ns, "spot")
			g.Expect(rs.Count).To(Equal(int32(1)))
			g.Expect(rs.CountedTowardsMax).To(BeZero())
			g.Expect(rs.MaxRestarts).To(Equal(int32(3)))
			g.Expect(rs.LastReason).To(Equal("Disruption"))
			g.Expect(events(ctx, g, ns, "spot", "Restarted")).NotTo(BeEmpty())
		}).Should(Succeed())
		if os.Getenv("KILN_CONFIG") != "" {
			// The CLI's user, allowed to train in this namespace too.
			letCLIUserIn(ctx, ns)
			out, errOut, code := kilnCLI("", "describe", "spot", "-n", ns)
			Expect(code).To(Equal(0), errOut)
			Expect(out).To(MatchRegexp(`Restarts:\s+1 \(0 of maxRestarts 3 counted; disruptions do not count\), last: Disruption`))
			Expect(out).To(MatchRegexp(`Warning\s+Restarted\s+TrainJob/spot\s+restarting all pods \(restart 1; not counted against maxRestarts, 0 of 3 used\): Disruption`))

			Expect(out).To(MatchRegexp(`Kept logs:\s+attempts 0 \(kiln logs spot --previous, or --attempt N\)`))

			By("keeping the first attempt's last words after its pods are gone: kiln logs --previous")
			out, errOut, code = kilnCLI("", "logs", "spot", "-n", ns, "--previous")
			Expect(code).To(Equal(0), errOut)
			Expect(out).To(ContainSubstring("[node-1 attempt 0] "))
			Expect(out).To(ContainSubstring("kiln.checkpoint: received SIGTERM"))
			Expect(out).To(ContainSubstring(fmt.Sprintf("stopped after step %d; exiting with code 75", stoppedAt)))
			// torchrun's agent prints its own SIGTERM traceback after the worker's last line.
			out, errOut, code = kilnCLI("", "logs", "spot", "-n", ns, "--attempt", "0", "--step", "node-0", "--tail", "100")
			Expect(code).To(Equal(0), errOut)
			Expect(out).To(ContainSubstring(fmt.Sprintf("stopped after step %d; exiting with code 75", stoppedAt)))
			_, errOut, code = kilnCLI("", "logs", "spot", "-n", ns, "--attempt", "7")
			Expect(code).To(Equal(1))
			Expect(errOut).To(ContainSubstring("no log of attempt 7 was kept; kept attempts: 0"))
		}
	})

	It("exits 75 on SIGTERM (not 0, which a Job counts as success) and resumes; without the helper a killed process starts over", func(ctx context.Context) {
		const steps = 30
		ns := newNamespace(ctx, "ft-signal")
		checkpointVolume(ctx, ns)
		env := map[string]string{"STEPS": strconv.Itoa(steps), "STEP_SECONDS": "0.5", "KILN_CHECKPOINT_INTERVAL": "100", "LAUNCH": "python3"}
		firstLogs := map[string]*logStream{}
		// One job after the other: started together, one could finish all its steps
		// (and never restart) while the other's pod was still starting.
		for _, name := range []string{"helped", "unhelped"} {
			if name == "unhelped" {
				env["KILN_HELPER"] = "0"
			}
			Expect(k8s.Create(ctx, spotJob(ns, name, spotRuntime, 1, env))).To(Succeed())
			pod := attemptPods(ctx, ns, name, 0, 1)[0]
			firstLogs[name] = followLogs(ctx, ns, pod.Name)
			Eventually(ctx, func() []int { return trainedSteps(firstLogs[name].String(), 0) }).WithTimeout(3 * time.Minute).Should(ContainElement(10))
			By("deleting the pod of " + name + " (a plain delete: SIGTERM, but no DisruptionTarget)")
			Expect(k8s.Delete(ctx, &pod)).To(Succeed())
		}
		for _, l := range firstLogs {
			Eventually(ctx, l.Done).WithTimeout(time.Minute).Should(BeClosed())
		}
		for _, name := range []string{"helped", "unhelped"} {
			waitConditionWithin(ctx, 4*time.Minute, ns, name, trainer.TrainJobComplete, metav1.ConditionTrue, "")
		}
		second := func(name string) string {
			pods := &corev1.PodList{}
			Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name})).To(Succeed())
			pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.Labels["jobset.sigs.k8s.io/restart-attempt"] != "1" })
			Expect(pods.Items).To(HaveLen(1), jobStory(ctx, ns, name))
			out, err := kubectl("", "logs", "-n", ns, pods.Items[0].Name)
			Expect(err).NotTo(HaveOccurred(), "%s\n%s", out, jobStory(ctx, ns, name))
			return out
		}

		By("the helper: an emergency checkpoint, exit 75, a restart not counted, and the rest of the steps")
		helped := firstLogs["helped"].String()
		m := regexp.MustCompile(`stopped after step (\d+); exiting with code 75`).FindStringSubmatch(helped)
		Expect(m).NotTo(BeNil(), helped)
		stoppedAt, _ := strconv.Atoi(m[1])
		rest := second("helped")
		Expect(rest).To(ContainSubstring(fmt.Sprintf("kiln.checkpoint: resuming from step %d ", stoppedAt)))
		Expect(append(trainedSteps(helped, 0), trainedSteps(rest, 0)...)).To(Equal(upTo(steps)))
		Eventually(ctx, func(g Gomega) {
			rs := restartsOf(ctx, g, ns, "helped")
			g.Expect([]int32{rs.Count, rs.CountedTowardsMax}).To(Equal([]int32{1, 0}))
			g.Expect(rs.LastReason).To(Equal("Disruption"))
		}).Should(Succeed())

		if os.Getenv("KILN_CONFIG") != "" {
			By("the deleted pod's last words, kept though it was running when deleted: kiln logs --previous")
			letCLIUserIn(ctx, ns)
			out, errOut, code := kilnCLI("", "logs", "helped", "-n", ns, "--previous")
			Expect(code).To(Equal(0), errOut)
			Expect(out).To(ContainSubstring("[node-0 attempt 0] "))
			Expect(out).To(ContainSubstring(fmt.Sprintf("stopped after step %d; exiting with code 75", stoppedAt)))
		}

		By("the control case: without the helper the process dies of SIGTERM (143), the restart counts, and training starts over")
		again := trainedSteps(second("unhelped"), 0)
		Expect(again).To(Equal(upTo(steps)), "started over from step 1")
		Expect(len(trainedSteps(firstLogs["unhelped"].String(), 0)) + len(again)).To(BeNumerically(">", steps))
		Eventually(ctx, func(g Gomega) {
			rs := restartsOf(ctx, g, ns, "unhelped")
			g.Expect([]int32{rs.Count, rs.CountedTowardsMax}).To(Equal([]int32{1, 1}))
			g.Expect(rs.LastReason).To(Equal("Failure"))
		}).Should(Succeed())
	})

	It("fails a job whose pod exits 1 twice with maxRestarts 1, and one that exits 78 at once", func(ctx context.Context) {
		ns := newNamespace(ctx, "ft-budget")
		runtimeCopy(ctx, ns, "spot-once", 1)
		checkpointVolume(ctx, ns)
		crash := spotJob(ns, "crash", "spot-once", 1, nil)
		crash.Spec.Trainer.Command = []string{"sh", "-c", "echo crashing; exit 1"}
		Expect(k8s.Create(ctx, crash)).To(Succeed())
		config := spotJob(ns, "config", "spot-once", 1, nil)
		// Under kiln.torchrun, which passes the worker's 78 on (torchrun alone exits 1).
		config.Spec.Trainer.Command = []string{"sh", "-c", `echo 'import sys; print("no such dataset: s3://nope", file=sys.stderr); sys.exit(78)' > /tmp/t.py && exec python3 -m kiln.torchrun /tmp/t.py`}
		Expect(k8s.Create(ctx, config)).To(Succeed())

		tj := waitConditionWithin(ctx, 4*time.Minute, ns, "crash", trainer.TrainJobFailed, metav1.ConditionTrue, "ReachedMaxRestarts")
		Expect(conditionOf(tj, trainer.TrainJobFailed).Message).To(HavePrefix("failed again after 1 restarts counted against its runtime's failurePolicy.maxRestarts (1), so it is not restarted"))
		Expect(*tj.Status.Restarts).To(And(
			HaveField("Count", int32(1)), HaveField("CountedTowardsMax", int32(1)), HaveField("MaxRestarts", int32(1)), HaveField("LastReason", "Failure"),
		))

		tj = waitConditionWithin(ctx, 4*time.Minute, ns, "config", trainer.TrainJobFailed, metav1.ConditionTrue, "FailJobSetFailurePolicyAction")
		Expect(conditionOf(tj, trainer.TrainJobFailed).Message).To(HavePrefix("failed with a failure its runtime's failure policy does not retry"))
		// Failed at once by the rule of exit code 78, which only kiln.torchrun passes on.
		Expect(tj.Status.Restarts.Count).To(BeZero())
	})
}

// Serial: its 100 jobs fill the fleet.
var _ = Describe("Fault tolerance at scale (KWOK)", Serial, func() {
	It("completes 100 spot jobs whose pods are evicted once each, none counting against its budget", func(ctx context.Context) {
		const jobs = 100
		ns := newNamespace(ctx, "ft-kwok")
		checkpointVolume(ctx, ns)
		// The 100 jobs are gone before the next spec starts: their garbage collection would
		// otherwise load the operator and the apiserver under the specs that time things.
		DeferCleanup(func(ctx context.Context) {
			Expect(k8s.DeleteAllOf(ctx, &trainer.TrainJob{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
			Eventually(ctx, func(g Gomega) {
				list := &trainer.TrainJobList{}
				g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
				g.Expect(list.Items).To(BeEmpty())
				pods := &corev1.PodList{}
				g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
				g.Expect(pods.Items).To(BeEmpty())
			}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		})
		for i := range jobs {
			tj := torchJob(ns, fmt.Sprintf("spot-%03d", i), 1).RuntimePatch(platform.SimulatedPods("e2e.kiln.dev/simulation", "node", map[string]string{
				platform.AnnotationSimEvictAfter: "2s", platform.AnnotationSimDuration: "3s",
			})).Obj()
			tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: spotRuntime}
			Expect(k8s.Create(ctx, tj)).To(Succeed())
		}
		Eventually(ctx, func(g Gomega) {
			list := &trainer.TrainJobList{}
			g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var complete, failed []string
			for _, tj := range list.Items {
				switch {
				case framework.HasCondition(&tj, trainer.TrainJobComplete, metav1.ConditionTrue, ""):
					complete = append(complete, tj.Name)
				case framework.HasCondition(&tj, trainer.TrainJobFailed, metav1.ConditionTrue, ""):
					failed = append(failed, tj.Name)
				}
			}
			if len(failed) > 0 {
				StopTrying(fmt.Sprintf("%d jobs failed, e.g. %s", len(failed), failed[0])).Now()
			}
			g.Expect(complete).To(HaveLen(jobs))
		}).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		list := &trainer.TrainJobList{}
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		for _, tj := range list.Items {
			Expect(tj.Status.Restarts).NotTo(BeNil(), tj.Name)
			Expect([]int32{tj.Status.Restarts.Count, tj.Status.Restarts.CountedTowardsMax}).To(Equal([]int32{1, 0}), "%s: %+v", tj.Name, tj.Status.Restarts)
			Expect(tj.Status.Restarts.LastReason).To(Equal("Disruption"), tj.Name)
		}
	})
})
