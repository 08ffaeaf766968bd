package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// progressScript trains with torchrun, reporting each step and its loss with kiln.progress
// (rank 0 only), closes the reporter, then posts once the raw way the Kubeflow SDK does: with
// nothing but the three variables the operator injected. With $HANG_AFTER set, it reports
// that many steps and then hangs, silent, until killed.
const progressScript = `cat > /tmp/train.py <<'EOF'
import json, os, ssl, sys, time, urllib.request
import torch, torch.distributed as dist
import kiln.progress as progress
dist.init_process_group("gloo")
torch.manual_seed(0)
x = torch.randn(256, 8)
y = x @ torch.arange(1.0, 9.0).unsqueeze(1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total, hang = int(os.environ["STEPS"]), int(os.environ.get("HANG_AFTER", "0"))
for step in range(1, total + 1):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    progress.report(step=step, total_steps=total, metrics={"loss": loss.item()})
    print(f"trained step {step} loss {loss.item():.4f}", flush=True)
    if hang and step == hang:
        progress.flush(5)
        print("hanging", flush=True)
        time.sleep(3600)
    time.sleep(0.5)
# The reporter posts what it holds and stops: nothing of it can follow the raw post (at exit
# it would post again what a failed flush left pending).
posted = progress.flush(30)
progress.get_reporter().close(30)
if dist.get_rank() == 0:
    print("reporter closed; the server holds its last state:", posted, flush=True)
    body = {"trainerStatus": {"progressPercentage": 100, "estimatedRemainingSeconds": 0,
        "metrics": [{"name": "raw", "value": "kubeflow-sdk"}],
        "lastUpdatedTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}
    token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
    req = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    ctx = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
    with urllib.request.urlopen(req, context=ctx) as res:
        print("raw post", res.status, flush=True)
dist.destroy_process_group()
EOF
exec torchrun /tmp/train.py`

// progressSpecs watch real trainers report their progress (see onTheRealNode).
func progressSpecs() {
	BeforeEach(func(ctx context.Context) { requireRealNode(ctx) })

	// Against the chart too: the trainers reach the status server of the operator's pods
	// through the webhook Service, by its DNS name, with the chart's certificate.
	It("shows a torchrun job's step, loss and ETA, its loss curve, and a raw post of the protocol", Label(chartMode), func(ctx context.Context) {
		ns := newNamespace(ctx, "progress")
		tj := realJob(ns, "curve", 2, progressScript)
		tj.Spec.Trainer.Env = append(tj.Spec.Trainer.Env, corev1.EnvVar{Name: "STEPS", Value: "40"}, corev1.EnvVar{Name: "KILN_PROGRESS_INTERVAL", Value: "1"})
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		key := client.ObjectKeyFromObject(tj)
		// While it trains: progress between 0 and 100, an ETA, a step and a loss.
		Eventually(ctx, func(g Gomega) {
			got := &trainer.TrainJob{}
			g.Expect(k8s.Get(ctx, key, got)).To(Succeed())
			ts := got.Status.TrainerStatus
			g.Expect(ts).NotTo(BeNil())
			g.Expect(ts.ProgressPercentage).NotTo(BeNil())
			g.Expect(*ts.ProgressPercentage).To(BeNumerically(">", 0))
			g.Expect(*ts.ProgressPercentage).To(BeNumerically("<", 100))
			g.Expect(ts.EstimatedRemainingSeconds).NotTo(BeNil())
			g.Expect(ts.Metrics).To(ContainElement(HaveField("Name", "loss")))
			g.Expect(ts.Metrics).To(ContainElement(HaveField("Name", kiln.MetricStep)))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		waitConditionWithin(ctx, 3*time.Minute, ns, tj.Name, trainer.TrainJobComplete, metav1.ConditionTrue, "")
		// The raw post, made with the three variables only, is the last word.
		Eventually(ctx, func(g Gomega) {
			got := &trainer.TrainJob{}
			g.Expect(k8s.Get(ctx, key, got)).To(Succeed())
			g.Expect(got.Status.TrainerStatus).NotTo(BeNil())
			g.Expect(got.Status.TrainerStatus.Metrics).To(ContainElement(trainer.Metric{Name: "raw", Value: "kubeflow-sdk"}))
			g.Expect(*got.Status.TrainerStatus.ProgressPercentage).To(BeEquivalentTo(100))
		}).WithTimeout(30*time.Second).Should(Succeed(), func() string {
			return "the trainers' logs:\n" + jobLogs(ns, tj.Name) + "\n" + statusWriters(ctx, key) + operatorLogAbout(ns)
		})
		// The loss curve: a history owned by the job, up to the last step once the history's
		// next write is due (at most one per --status-server-history-interval, 10 s).
		h := &kiln.TrainJobMetrics{}
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, key, h)).To(Succeed())
			g.Expect(h.Series).To(ContainElement(And(HaveField("Name", "loss"),
				WithTransform(func(s kiln.MetricSeries) int { return len(s.Times) }, BeNumerically(">=", 5)),
				HaveField("Steps", ContainElement(BeEquivalentTo(40))))))
		}).WithTimeout(time.Minute).Should(Succeed())
		Expect(h.OwnerReferences).To(ContainElement(HaveField("Name", tj.Name)))
		if os.Getenv("KILN_CONFIG") != "" {
			// The CLI's user, allowed to train in this namespace too, sees the curve.
			letCLIUserIn(ctx, ns)
			out, errOut, code := kilnCLI("", "describe", tj.Name, "-n", ns)
			Expect(code).To(Equal(0), errOut)
			Expect(out).To(MatchRegexp(`Percent:\s+100%`))
			Expect(out).To(MatchRegexp(`Curve:\s+loss, min [0-9.e-]+, last [0-9.e-]+, steps \d+ to 40`))
		}
	})

	It("restarts a trainer that stops reporting once, then fails it ProgressDeadlineExceeded", func(ctx context.Context) {
		ns := newNamespace(ctx, "stall")
		tj := realJob(ns, "hang", 1, progressScript)
		tj.Annotations = map[string]string{kiln.AnnotationProgressDeadline: "20s"}
		tj.Spec.Trainer.Env = append(tj.Spec.Trainer.Env, corev1.EnvVar{Name: "STEPS", Value: "1000"}, corev1.EnvVar{Name: "HANG_AFTER", Value: "3"},
			corev1.EnvVar{Name: "KILN_PROGRESS_INTERVAL", Value: "1"})
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		key := client.ObjectKeyFromObject(tj)
		Eventually(ctx, func(g Gomega) {
			got := &trainer.TrainJob{}
			g.Expect(k8s.Get(ctx, key, got)).To(Succeed())
			g.Expect(got.Status.Restarts).NotTo(BeNil())
			g.Expect(got.Status.Restarts.ProgressStalls).To(BeEquivalentTo(1))
			g.Expect(got.Status.Restarts.LastReason).To(Equal(trainer.TrainJobProgressStalledReason))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		got := waitConditionWithin(ctx, 4*time.Minute, ns, tj.Name, trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobProgressDeadlineExceededReason)
		Expect(conditionOf(got, trainer.TrainJobFailed).Message).To(ContainSubstring("reported no progress for"))
		Expect(got.Status.Restarts.Count).To(BeEquivalentTo(1))
	})
}

// The first jobs a newcomer runs (the README's, the quickstart's) run on KWOK, whose pods
// run no code: the platform's simulated trainer reports for them, so that progress and a
// loss curve show on the first try.
var _ = Describe("A simulated job's progress", func() {
	It("shows the README's first job reporting its steps and a falling loss", func(ctx context.Context) {
		if os.Getenv(platform.EnvInstall) == string(platform.InstallChart) {
			Skip("the simulated trainer runs with Kiln as processes (make up)")
		}
		ns := newNamespace(ctx, "first")
		tj := torchJob(ns, "first-trainjob", 2).Image("docker.io/my-training-image:latest").Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		waitCondition(ctx, ns, tj.Name, trainer.TrainJobComplete, metav1.ConditionTrue, "")
		Eventually(ctx, func(g Gomega) {
			got := getTrainJob(ctx, g, ns, tj.Name)
			g.Expect(got.Status.TrainerStatus).NotTo(BeNil(), "the simulated trainer's reports")
			g.Expect(got.Status.TrainerStatus.ProgressPercentage).To(HaveValue(BeNumerically(">", 0)))
			h := &kiln.TrainJobMetrics{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), h)).To(Succeed())
			var loss []float64
			for _, series := range h.Series {
				if series.Name == "loss" {
					for _, v := range series.Values {
						f, err := strconv.ParseFloat(v, 64)
						g.Expect(err).NotTo(HaveOccurred())
						loss = append(loss, f)
					}
				}
			}
			g.Expect(len(loss)).To(BeNumerically(">=", 2), "a curve, not a point")
			g.Expect(loss[len(loss)-1]).To(BeNumerically("<", loss[0]), "the loss falls")
		}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})
})

// Serial: it restarts the operator, which every other spec relies on.
var _ = Describe("Progress across an operator restart", Serial, func() {
	It("keeps a job's history, and every report it answered, across a graceful restart", func(ctx context.Context) {
		root := os.Getenv("KILN_ROOT")
		if root == "" || os.Getenv(platform.EnvInstall) == string(platform.InstallChart) {
			Skip("the status server is reached as a local process here (KILN_ROOT, processes install)")
		}
		p := &platform.Platform{Config: platform.DefaultConfig(root), Out: GinkgoWriter}
		ns := newNamespace(ctx, "history")
		// It reports itself: the simulated trainer stays out.
		tj := torchJob(ns, "curve", 1).RuntimePatch(podPatch("node", map[string]string{annDuration: "300s", platform.AnnotationSimProgress: "off"})).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		report := statusReporter(ctx, p, ns, tj.Name)
		history := func(g Gomega) []int64 {
			h := &kiln.TrainJobMetrics{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), h)).To(Succeed())
			for _, s := range h.Series {
				if s.Name == "loss" {
					return s.Steps
				}
			}
			return nil
		}

		By("reporting steps 1 to 5 and waiting for them in the stored history")
		for step := 1; step <= 5; step++ {
			report(step)
		}
		Eventually(ctx, func(g Gomega) { g.Expect(history(g)).To(ContainElement(BeEquivalentTo(5))) }).WithTimeout(30 * time.Second).Should(Succeed())

		By("reporting steps 6 to 8, held in memory for the history interval, and stopping the operator gracefully")
		for step := 6; step <= 8; step++ {
			report(step)
		}
		op := p.OperatorProcess()
		pid, running := op.Running()
		Expect(running).To(BeTrue())
		DeferCleanup(func(ctx context.Context) { Expect(p.StartOperator(ctx)).To(Succeed()) })
		Expect(syscall.Kill(pid, syscall.SIGTERM)).To(Succeed())
		Eventually(func() bool { _, running := op.Running(); return running }).WithTimeout(30 * time.Second).Should(BeFalse())
		Expect(p.StartOperator(ctx)).To(Succeed())

		By("finding every answered report in the history after the restart, and the next ones after them")
		Eventually(ctx, func(g Gomega) { g.Expect(history(g)).To(Equal([]int64{1, 2, 3, 4, 5, 6, 7, 8})) }).WithTimeout(10 * time.Second).Should(Succeed())
		report(9)
		report(10)
		Eventually(ctx, func(g Gomega) {
			g.Expect(history(g)).To(Equal([]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}))
			got := getTrainJob(ctx, g, ns, tj.Name)
			g.Expect(got.Status.TrainerStatus).NotTo(BeNil())
			g.Expect(got.Status.TrainerStatus.Metrics).To(ContainElement(trainer.Metric{Name: kiln.MetricStep, Value: "10"}))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})
})

// statusReporter posts progress reports for TrainJob ns/name to the local operator's status
// server as its trainer would: with a token bound to its pod, of its audience, over TLS
// trusted by the platform's CA. Each call reports one step of 100 (and a loss) and expects 200.
func statusReporter(ctx context.Context, p *platform.Platform, ns, name string) func(step int) {
	GinkgoHelper()
	var pod corev1.Pod
	Eventually(ctx, func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		pod = pods.Items[0]
	}).Should(Succeed())
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences:         []string{trainer.TokenAudience(ns, name)},
		ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	ca, err := os.ReadFile(p.PKI().CAFile())
	Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", p.OperatorStatus, trainer.StatusPath(ns, name))
	return func(step int) {
		GinkgoHelper()
		body, err := json.Marshal(trainer.UpdateTrainJobStatusRequest{TrainerStatus: &trainer.TrainerStatus{
			ProgressPercentage: ptr.To(int32(min(step, 100))),
			Metrics: []trainer.Metric{
				{Name: kiln.MetricStep, Value: strconv.Itoa(step)}, {Name: kiln.MetricTotalSteps, Value: "100"},
				{Name: "loss", Value: strconv.FormatFloat(1/float64(step), 'f', 3, 64)},
			},
			LastUpdatedTime: metav1.Now(),
		}})
		Expect(err).NotTo(HaveOccurred())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer res.Body.Close()
		Expect(res.StatusCode).To(Equal(http.StatusOK), "report of step %d", step)
	}
}

// statusWriters says who last wrote the TrainJob's status and when (its managed fields):
// whether a write of the status server's came last, or someone else's after it.
func statusWriters(ctx context.Context, key client.ObjectKey) string {
	got := &trainer.TrainJob{}
	if err := k8s.Get(ctx, key, got); err != nil {
		return "(the TrainJob's managed fields: " + err.Error() + ")\n"
	}
	out := fmt.Sprintf("--- the TrainJob's writers (resourceVersion %s):\n", got.ResourceVersion)
	for _, m := range got.ManagedFields {
		at := "?"
		if m.Time != nil {
			at = m.Time.UTC().Format(time.RFC3339)
		}
		out += fmt.Sprintf("  %s %s subresource=%q at %s\n", m.Manager, m.Operation, m.Subresource, at)
	}
	return out + "\n"
}
