package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/test/framework"
)

// TorchImage is the real node's training image (make node-images): Debian's PyTorch for CPU.
const TorchImage = "kiln.local/torch-cpu:1.13"

// onRealNode is what a pod needs to land on the real node: its pool and the toleration of
// its taint.
var onRealNode = struct {
	selector    map[string]string
	tolerations []corev1.Toleration
}{
	selector: map[string]string{platform.LabelNodePool: platform.NodePoolReal},
	tolerations: []corev1.Toleration{{
		Key: platform.TaintRealNode, Operator: corev1.TolerationOpEqual, Value: platform.NodePoolReal, Effect: corev1.TaintEffectNoSchedule,
	}},
}

// requireRealNode fails unless the cluster has the real node Ready, and skips only when the
// platform was started without one on purpose (KILN_REAL_NODES=0).
func requireRealNode(ctx context.Context) {
	GinkgoHelper()
	if os.Getenv(platform.EnvRealNodes) == "0" {
		Skip(platform.EnvRealNodes + "=0: the platform runs no real node")
	}
	node := &corev1.Node{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: platform.RealNodeName}, node)).To(Succeed(), "the real node %s is missing", platform.RealNodeName)
	ready := false
	for _, c := range node.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	Expect(ready).To(BeTrue(), "node %s is not Ready: %+v", platform.RealNodeName, node.Status.Conditions)
}

// realJob is a TrainJob on torch-distributed whose pods run script (sh) in TorchImage on the
// real node, one process per node.
func realJob(ns, name string, nodes int32, script string) *trainer.TrainJob {
	return torchJob(ns, name, nodes).Image(TorchImage).NumProcPerNode(1).Command("sh", "-c", script).
		RuntimePatch(trainer.RuntimePatch{
			Manager: "e2e.kiln.dev/real-node",
			TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
				Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{
					Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
						NodeSelector:                  onRealNode.selector,
						Tolerations:                   onRealNode.tolerations,
						TerminationGracePeriodSeconds: ptr.To[int64](10),
					}}},
				}}}},
			}},
		}).Obj()
}

// ddpScript trains a linear model with DistributedDataParallel over gloo for a fixed
// number of steps; every rank says how it found the others, rank 0 prints the loss.
const ddpScript = `cat > /tmp/train.py <<'EOF'
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank}/{world} rendezvous at {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
torch.manual_seed(0)
x = torch.randn(256, 8)
y = x @ torch.arange(1.0, 9.0).unsqueeze(1) + 0.1 * torch.randn(256, 1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
shard = slice(rank * 128, (rank + 1) * 128)
for step in range(40):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
    loss.backward()
    opt.step()
    if rank == 0 and step % 10 in (0, 9):
        print(f"step {step} loss {loss.item():.4f}", flush=True)
dist.barrier()
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
EOF
exec torchrun /tmp/train.py`

// sigtermScript runs until it is told to stop, and says when it is.
const sigtermScript = `exec python3 -u -c '
import signal, sys, time
def stop(sig, frame):
    print("received SIGTERM", flush=True)
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
print("training", flush=True)
while True:
    time.sleep(0.2)
'`

// Every spec that trains on the real node runs in this one Ordered container: one at a
// time, on one process, because two torch jobs on this machine's two cores would make each
// one's timing the other's; the KWOK specs run beside them on the other processes. A
// failure does not skip the specs after it (ContinueOnFailure): each stands alone.
var _ = Describe("On the real node", Ordered, ContinueOnFailure, func() {
	Describe("the real node", realNodeSpecs)
	Describe("Fault tolerance on the real node", faultToleranceSpecs)
	Describe("Progress on the real node", progressSpecs)
	Describe("Bringing a PyTorchJob over", convertSpecs)
	Describe("Kubeflow SDK scripts on the real node", kubeflowSDKSpecs)
})

// realNodeSpecs are the real node's own specs (see onTheRealNode).
func realNodeSpecs() {
	BeforeEach(func(ctx context.Context) { requireRealNode(ctx) })

	It("runs real processes: logs, exec, port-forward and in-cluster access to the apiserver", func(ctx context.Context) {
		ns := newNamespace(ctx, "real-pod")
		pod := runRealPod(ctx, ns, "web", "sh", "-c", "echo serving from $(hostname) && exec python3 -m http.server 8000 --directory /etc")
		Expect(pod.Spec.NodeName).To(Equal(platform.RealNodeName))
		Expect(pod.Status.PodIP).To(HavePrefix("100.64.1."))

		Eventually(func() (string, error) { return kubectl("", "logs", "-n", ns, "web") }).Should(Equal("serving from web\n"))

		out, err := kubectl("", "exec", "-n", ns, "web", "--", "cat", "/etc/debian_version")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`^12\.`))

		// In-cluster configuration: the kubernetes Service by its DNS name, the pod's
		// ServiceAccount token and the cluster's CA.
		out, err = kubectl("", "exec", "-n", ns, "web", "--", "python3", "-c", `
import ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
ctx = ssl.create_default_context(cafile=sa + "ca.crt")
req = urllib.request.Request("https://kubernetes.default.svc/version", headers={"Authorization": "Bearer " + open(sa + "token").read()})
print(urllib.request.urlopen(req, context=ctx).status)`)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(Equal("200\n"))

		port := freePort()
		pf := exec.Command("kubectl", "port-forward", "-n", ns, "pod/web", fmt.Sprintf("%d:8000", port))
		Expect(pf.Start()).To(Succeed())
		DeferCleanup(func() { _ = pf.Process.Kill(); _ = pf.Wait() })
		Eventually(func(g Gomega) {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debian_version", port))
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			g.Expect(string(body)).To(HavePrefix("12."))
		}).Should(Succeed())
	})

	It("trains with torchrun DDP over gloo on two pods that rendezvous through cluster DNS", func(ctx context.Context) {
		ns := newNamespace(ctx, "real-ddp")
		Expect(k8s.Create(ctx, realJob(ns, "ddp", 2, ddpScript))).To(Succeed())
		waitConditionWithin(ctx, 4*time.Minute, ns, "ddp", trainer.TrainJobComplete, metav1.ConditionTrue, "")

		master := "ddp-node-0-0.ddp"
		logs := map[string]string{}
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": "ddp"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			Expect(p.Spec.NodeName).To(Equal(platform.RealNodeName))
			rank := p.Labels["batch.kubernetes.io/job-completion-index"]
			out, err := kubectl("", "logs", "-n", ns, p.Name)
			Expect(err).NotTo(HaveOccurred(), out)
			logs[rank] = out
			Expect(out).To(ContainSubstring(fmt.Sprintf("rank %s/2 rendezvous at %s:29500", rank, master)))
			Expect(out).To(ContainSubstring(fmt.Sprintf("rank %s done", rank)))
		}
		losses := map[int]float64{}
		for _, m := range regexp.MustCompile(`step (\d+) loss ([0-9.]+)`).FindAllStringSubmatch(logs["0"], -1) {
			step, _ := strconv.Atoi(m[1])
			losses[step], _ = strconv.ParseFloat(m[2], 64)
		}
		Expect(losses).To(HaveKey(0), logs["0"])
		Expect(losses).To(HaveKey(39), logs["0"])
		Expect(losses[39]).To(BeNumerically("<", losses[0]/4), "the loss must fall:\n%s", logs["0"])
	})

	It("ends a job at its activeDeadlineSeconds: the trainer gets SIGTERM, its pods go within their grace period", func(ctx context.Context) {
		ns := newNamespace(ctx, "real-deadline")
		tj := realJob(ns, "late", 1, sigtermScript)
		tj.Spec.ActiveDeadlineSeconds = ptr.To[int64](20)
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		pod := runningPod(ctx, ns, "late")
		logs := followLogs(ctx, ns, pod.Name)
		Eventually(logs.String).Should(ContainSubstring("training"))

		got := waitConditionWithin(ctx, 60*time.Second, ns, "late", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
		failedAt := conditionOf(got, trainer.TrainJobFailed).LastTransitionTime.Time
		Eventually(ctx, logs.Done).WithTimeout(30 * time.Second).Should(BeClosed())
		Expect(logs.String()).To(ContainSubstring("received SIGTERM"))
		// Gone within the grace period (10s), with a second of slack for the apiserver.
		Eventually(ctx, func() bool {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(30 * time.Second).Should(BeTrue())
		Expect(time.Since(failedAt)).To(BeNumerically("<", 25*time.Second))
	})

	It("suspends a running job (its processes get SIGTERM) and resumes it with new pods", func(ctx context.Context) {
		ns := newNamespace(ctx, "real-suspend")
		Expect(k8s.Create(ctx, realJob(ns, "pausable", 1, sigtermScript))).To(Succeed())
		first := runningPod(ctx, ns, "pausable")
		logs := followLogs(ctx, ns, first.Name)
		Eventually(logs.String).Should(ContainSubstring("training"))

		tj := &trainer.TrainJob{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pausable"}, tj)).To(Succeed())
		patch := client.MergeFrom(tj.DeepCopy())
		tj.Spec.Suspend = ptr.To(true)
		Expect(k8s.Patch(ctx, tj, patch)).To(Succeed())
		waitCondition(ctx, ns, "pausable", trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)
		Eventually(ctx, logs.Done).WithTimeout(30 * time.Second).Should(BeClosed())
		Expect(logs.String()).To(ContainSubstring("received SIGTERM"))
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).WithTimeout(30 * time.Second).Should(Succeed())

		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pausable"}, tj)).To(Succeed())
		patch = client.MergeFrom(tj.DeepCopy())
		tj.Spec.Suspend = ptr.To(false)
		Expect(k8s.Patch(ctx, tj, patch)).To(Succeed())
		second := runningPod(ctx, ns, "pausable")
		Expect(second.UID).NotTo(Equal(first.UID))
		Expect(second.Spec.NodeName).To(Equal(platform.RealNodeName))
		resumed := followLogs(ctx, ns, second.Name)
		Eventually(resumed.String).Should(ContainSubstring("training"))
	})
}

// runRealPod runs command in TorchImage as pod name on the real node, and waits until it runs.
func runRealPod(ctx context.Context, ns, name string, command ...string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: onRealNode.selector, Tolerations: onRealNode.tolerations,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: name, Image: TorchImage, Command: command}},
		},
	}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	Eventually(ctx, func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	}).Should(Succeed())
	return pod
}

// runningPod waits for the one pod of TrainJob name to run on the real node.
func runningPod(ctx context.Context, ns, name string) *corev1.Pod {
	GinkgoHelper()
	var pod corev1.Pod
	Eventually(ctx, func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name})).To(Succeed())
		var running []corev1.Pod
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		g.Expect(running).To(HaveLen(1))
		pod = running[0]
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	Expect(pod.Spec.NodeName).To(Equal(platform.RealNodeName))
	return &pod
}

// logStream is a container's log, followed until the container ends.
type logStream struct {
	mu   sync.Mutex
	b    strings.Builder
	done chan struct{}
}

func (l *logStream) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logStream) Done() chan struct{} { return l.done }

// followLogs streams a pod's log as the kubelet serves it, until the container exits.
func followLogs(ctx context.Context, ns, pod string) *logStream {
	GinkgoHelper()
	l := &logStream{done: make(chan struct{})}
	rc, err := clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Follow: true}).Stream(context.WithoutCancel(ctx))
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer close(l.done)
		defer rc.Close()
		s := bufio.NewScanner(rc)
		for s.Scan() {
			l.mu.Lock()
			l.b.WriteString(s.Text() + "\n")
			l.mu.Unlock()
		}
	}()
	return l
}

// jobLogs is every container log of TrainJob ns/name's pods as the kubelet still serves it,
// each under its pod's name: for a failure's message (what the trainers printed, warnings of
// kiln.progress included), never asserted on.
func jobLogs(ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}); err != nil {
		return "listing the pods: " + err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		out, err := clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			out = []byte(err.Error())
		}
		fmt.Fprintf(&b, "--- pod %s (%s):\n%s\n", p.Name, p.Status.Phase, out)
	}
	return b.String()
}

// operatorLogAbout is what the operator logged about namespace ns and from its status
// server (the local process's log, or the chart's pods'): its last 80 such lines, for a
// failure's message.
func operatorLogAbout(ns string) string {
	root := os.Getenv("KILN_ROOT")
	var path, data string
	switch {
	case os.Getenv(platform.EnvInstall) == string(platform.InstallChart):
		// The chart's operator pods (all of them: a trainer reaches any through the Service).
		path = "the chart's operator pods"
		out, err := kubectl("", "-n", platform.APIServerNamespace, "logs", "-l", "app.kubernetes.io/component=operator", "--tail=5000", "--prefix")
		if err != nil {
			return "reading the operator's log: " + err.Error() + "\n" + out
		}
		data = out
	case root != "":
		p := &platform.Platform{Config: platform.DefaultConfig(root)}
		path = p.OperatorProcess().LogFile()
		b, err := os.ReadFile(path)
		if err != nil {
			return "reading the operator's log: " + err.Error()
		}
		data = string(b)
	default:
		return "(the operator's log: KILN_ROOT is not set)"
	}
	var lines []string
	for line := range strings.Lines(data) {
		if strings.Contains(line, ns) || strings.Contains(line, "status-server") || strings.HasPrefix(line, "--- ") {
			lines = append(lines, line)
		}
	}
	lines = lines[max(0, len(lines)-80):]
	out := fmt.Sprintf("--- %s, its lines about %s and from the status server:\n%s", path, ns, strings.Join(lines, ""))
	if os.Getenv(platform.EnvInstall) != string(platform.InstallChart) && root != "" {
		out += statusServerGoroutines(platform.DefaultConfig(root).OperatorPprof)
	}
	return out
}

// statusServerGoroutines is what the operator process's goroutines of the status server are
// doing (its pprof endpoint, on 127.0.0.1): where a writer waits, when writes stop.
func statusServerGoroutines(pprofPort int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/goroutine?debug=1", pprofPort), nil)
	if err != nil {
		return "\n(the operator's goroutines: " + err.Error() + ")"
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "\n(the operator's goroutines: " + err.Error() + ")"
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "\n(the operator's goroutines: " + err.Error() + ")"
	}
	var b strings.Builder
	b.WriteString("\n--- the operator's goroutines in the status server:\n")
	for stack := range strings.SplitSeq(string(body), "\n\n") {
		if strings.Contains(stack, "/statusserver.") {
			b.WriteString(stack + "\n\n")
		}
	}
	return b.String()
}

// waitConditionWithin waits at most timeout for the TrainJob's condition, and no longer
// once the job failed.
func waitConditionWithin(ctx context.Context, timeout time.Duration, ns, name, t string, s metav1.ConditionStatus, reason string) *trainer.TrainJob {
	GinkgoHelper()
	return framework.WaitForCondition(ctx, k8s, client.ObjectKey{Namespace: ns, Name: name}, t, s, reason, framework.Within(timeout))
}

func conditionOf(tj *trainer.TrainJob, t string) metav1.Condition {
	GinkgoHelper()
	c := meta.FindStatusCondition(tj.Status.Conditions, t)
	Expect(c).NotTo(BeNil(), "no condition %s", t)
	return *c
}

func freePort() int {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

var _ = Describe("the real node after a crash", Serial, func() {
	BeforeEach(func(ctx context.Context) { requireRealNode(ctx) })

	It("is cleaned up and started again by `kiln-platform up` when its components were killed", func(ctx context.Context) {
		root := os.Getenv("KILN_ROOT")
		if root == "" {
			Skip("KILN_ROOT is not set: not running on the local platform")
		}
		cfg := platform.DefaultConfig(root)
		ns := newNamespace(ctx, "real-crash")
		runRealPod(ctx, ns, "survivor", "sleep", "3600")
		checkpointVolume(ctx, ns)
		claim := &corev1.PersistentVolumeClaim{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kiln-checkpoints"}, claim)).To(Succeed())
		volume := filepath.Join(cfg.StateDir, "node", "volumes", claim.Spec.VolumeName+"_"+ns+"_kiln-checkpoints")
		Expect(volume).To(BeADirectory())

		By("killing the node's components and containerd's shims with SIGKILL")
		for _, name := range []string{"kubelet", "containerd", "kube-proxy", "coredns", "local-path-provisioner", "apiserver-forward"} {
			data, err := os.ReadFile(filepath.Join(cfg.RunDir(), name+".pid"))
			Expect(err).NotTo(HaveOccurred())
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			Expect(err).NotTo(HaveOccurred())
			Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed(), name)
		}

		By("running `kiln-platform up` again")
		up := exec.Command(cfg.Bin("kiln-platform"), "--root", root, "up")
		out, err := up.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("real node " + platform.RealNodeName + ": Ready"))

		By("running the pod again, with exec working")
		Eventually(ctx, func(g Gomega) {
			out, err := kubectl("", "exec", "-n", ns, "survivor", "--", "true")
			g.Expect(err).NotTo(HaveOccurred(), out)
		}).WithTimeout(2 * time.Minute).Should(Succeed())

		By("keeping the claims' volumes, and provisioning new ones")
		Expect(volume).To(BeADirectory(), "the cluster still has the claim: its data stays")
		other := newNamespace(ctx, "real-crash")
		checkpointVolume(ctx, other)
	})
})
