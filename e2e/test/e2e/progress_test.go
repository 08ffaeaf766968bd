package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// progressScript trains with torchrun, reporting each step and its loss with kiln.progress
// (rank 0 only), then posts once the raw way the Kubeflow SDK does: with nothing but the
// three variables the operator injected. With $HANG_AFTER set, it reports that many steps
// and then hangs, silent, until killed.
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
progress.flush(10)
if dist.get_rank() == 0:
    body = {"trainerStatus": {"progressPercentage": 100, "estimatedRemainingSeconds": 0,
        "metrics": [{"name": "raw", "value": "kubeflow-sdk"}],
        "lastUpdatedTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}
    token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
    req = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    ctx = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
    with urllib.request.urlopen(req, context=ctx) as res:
        print("raw post", res.status, flush=True)
EOF
exec torchrun /tmp/train.py`

// progressSpecs watch real trainers report their progress (see onTheRealNode).
func progressSpecs() {
	BeforeEach(func(ctx context.Context) { requireRealNode(ctx) })

	It("shows a torchrun job's step, loss and ETA, its loss curve, and a raw post of the protocol", func(ctx context.Context) {
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
			g.Expect(got.Status.TrainerStatus.Metrics).To(ContainElement(trainer.Metric{Name: "raw", Value: "kubeflow-sdk"}))
			g.Expect(*got.Status.TrainerStatus.ProgressPercentage).To(BeEquivalentTo(100))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		// The loss curve: a history owned by the job.
		h := &kiln.TrainJobMetrics{}
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, key, h)).To(Succeed())
			g.Expect(h.Series).To(ContainElement(And(HaveField("Name", "loss"),
				WithTransform(func(s kiln.MetricSeries) int { return len(s.Times) }, BeNumerically(">=", 5)))))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(h.OwnerReferences).To(ContainElement(HaveField("Name", tj.Name)))
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
