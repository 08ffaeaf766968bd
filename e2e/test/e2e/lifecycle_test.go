package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/test/framework"
)

var _ = Describe("TrainJob lifecycle", func() {
	It("fails at the deadline, kills the pods, and shows it as documented", func(ctx context.Context) {
		ns := newNamespace(ctx, "deadline")
		tj := torchJob(ns, "slow", 2).ActiveDeadlineSeconds(3).RuntimePatch(podPatch("node", map[string]string{annDuration: "120s"})).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		got := waitCondition(ctx, ns, "slow", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
		Expect(got.Status.CompletionTime.Sub(got.Status.StartTime.Time)).To(BeNumerically(">=", 3*time.Second))
		out, err := kubectl("", "get", "trainjob", "slow", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.status=="True")]}`)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(`"type":"Failed"`))
		Expect(out).To(ContainSubstring(`"reason":"DeadlineExceeded"`))
		Expect(out).To(ContainSubstring(`"message":"TrainJob exceeded its active deadline"`))
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			for _, p := range pods.Items {
				g.Expect(p.DeletionTimestamp).NotTo(BeNil(), "pod %s is terminating", p.Name)
			}
		}).WithTimeout(10*time.Second).Should(Succeed(), "every pod is told to stop at once, with its grace period")
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).Should(Succeed(), "every pod of the TrainJob is gone")
	})

	It("gives a queued TrainJob its full deadline after Kueue admits it", func(ctx context.Context) {
		ns := newNamespace(ctx, "queued-deadline")
		smallQueue(ctx, ns)

		By("filling the queue's quota for 8 seconds")
		blocker := gpuJob(ns, "blocker", 8, map[string]string{annDuration: "8s"})
		blocker.Labels = map[string]string{labelQueue: "queue"}
		blocker.Spec.Suspend = ptr.To(true)
		Expect(k8s.Create(ctx, blocker)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(blocker), blocker)).To(Succeed())
			g.Expect(blocker.Spec.Suspend).To(HaveValue(BeFalse()))
		}).Should(Succeed())

		By("queueing a TrainJob whose deadline (4s) is shorter than its wait")
		tj := torchJob(ns, "patient", 1).Label(labelQueue, "queue").ActiveDeadlineSeconds(4).ResourcesPerNode(gpusPerNode("8", "")).
			RuntimePatch(podPatch("node", map[string]string{annDuration: "120s"})).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, jobCondition(ctx, blocker, batchv1.JobComplete)).Should(Succeed())
		admitted := time.Now()

		By("running it for its whole deadline after admission")
		got := waitCondition(ctx, ns, "patient", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
		Expect(time.Since(admitted)).To(BeNumerically(">=", 3*time.Second), "the deadline counted from admission, not creation")
		Expect(got.Status.StartTime.Time).To(BeTemporally(">=", got.CreationTimestamp.Add(6*time.Second)), "startTime is the admission time")
		Expect(got.Status.CompletionTime.Sub(got.Status.StartTime.Time)).To(BeNumerically(">=", 4*time.Second))

		By("releasing the quota: Kueue finishes the Workload")
		Eventually(ctx, func(g Gomega) {
			wls := workloadsOf(ctx, g, ns, got.UID)
			g.Expect(wls).To(HaveLen(1))
			g.Expect(conditionStatus(&wls[0], "Finished")).To(Equal("True"))
		}).Should(Succeed())
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobFailed)).To(BeTrue())
	})

	It("deletes a finished TrainJob and everything it owns after its TTL", func(ctx context.Context) {
		ns := newNamespace(ctx, "ttl")
		tj := torchJob(ns, "short-lived", 1).TTLSecondsAfterFinished(2).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		waitCondition(ctx, ns, "short-lived", trainer.TrainJobComplete, metav1.ConditionTrue, "")
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), &trainer.TrainJob{})).NotTo(Succeed())
			for _, list := range []client.ObjectList{&corev1.PodList{}, &corev1.ConfigMapList{}, &batchv1.JobList{}} {
				g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
				n := 0
				switch l := list.(type) {
				case *corev1.PodList:
					n = len(l.Items)
				case *batchv1.JobList:
					n = len(l.Items)
				case *corev1.ConfigMapList:
					// Not the namespace's own: kube-root-ca.crt, and the CA of Kiln's
					// status server that every trainer of the namespace mounts.
					for _, cm := range l.Items {
						if cm.Name != "kube-root-ca.crt" && cm.Name != kiln.StatusServerCAConfigMap {
							n++
						}
					}
				}
				g.Expect(n).To(BeZero(), "%T left behind", list)
			}
		}).Should(Succeed())
	})
})

var _ = Describe("TrainJob lifecycle under Kueue preemption", func() {
	It("restarts the deadline on re-admission and keeps the TTL", func(ctx context.Context) {
		ns := newNamespace(ctx, "preempt")
		smallQueue(ctx, ns)
		for name, value := range map[string]int64{ns + "-low": 100, ns + "-high": 1000} {
			wpc := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
				"metadata": map[string]any{"name": name}, "value": value,
			}}
			Expect(k8s.Create(ctx, wpc)).To(Succeed())
			DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, wpc))).To(Succeed()) })
		}
		queued := func(name, priority, duration string, deadline int64) *trainer.TrainJob {
			return torchJob(ns, name, 1).Label(labelQueue, "queue").Label("kueue.x-k8s.io/priority-class", ns+"-"+priority).
				ActiveDeadlineSeconds(deadline).ResourcesPerNode(gpusPerNode("8", "")).
				RuntimePatch(podPatch("node", map[string]string{annDuration: duration})).Obj()
		}
		low := queued("low", "low", "300s", 10)
		low.Spec.TTLSecondsAfterFinished = ptr.To[int32](600)
		Expect(k8s.Create(ctx, low)).To(Succeed())
		var firstStart time.Time
		Eventually(ctx, func(g Gomega) {
			tj := getTrainJob(ctx, g, ns, "low")
			g.Expect(tj.Status.StartTime).NotTo(BeNil())
			firstStart = tj.Status.StartTime.Time
		}).Should(Succeed())

		By("preempting it with a higher-priority job")
		Expect(k8s.Create(ctx, queued("high", "high", "5s", 600))).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			tj := getTrainJob(ctx, g, ns, "low")
			g.Expect(framework.HasCondition(tj, trainer.TrainJobSuspended, metav1.ConditionTrue, "")).To(BeTrue())
			g.Expect(tj.Status.StartTime).To(BeNil(), "the clock stops while preempted")
		}).Should(Succeed())
		high := waitCondition(ctx, ns, "high", trainer.TrainJobComplete, metav1.ConditionTrue, "")

		By("re-admitting it: the deadline counts again from the new admission")
		got := waitCondition(ctx, ns, "low", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
		Expect(got.Status.StartTime.Time).To(BeTemporally(">", firstStart))
		Expect(got.Status.StartTime.Time).To(BeTemporally(">=", high.Status.CompletionTime.Add(-time.Second)), "restarted after the preemptor finished")
		Expect(got.Status.CompletionTime.Sub(got.Status.StartTime.Time)).To(BeNumerically(">=", 10*time.Second))
		Expect(got.Spec.TTLSecondsAfterFinished).To(HaveValue(BeEquivalentTo(600)), "the TTL survived preemption and re-admission")
	})
})

// killOperator stops Kiln's operator at once (SIGKILL of the local process, or, when the
// chart installed it, its Deployment scaled to zero with no grace period) and returns a
// function that starts it again; the operator is started again after the spec in any case.
func killOperator() (start func(context.Context)) {
	root := os.Getenv("KILN_ROOT")
	if root == "" {
		Skip("KILN_ROOT is not set: the operator is not a local process here")
	}
	if os.Getenv(platform.EnvInstall) == string(platform.InstallChart) {
		return killOperatorPods()
	}
	p := &platform.Platform{Config: platform.DefaultConfig(root), Out: GinkgoWriter}
	op := p.OperatorProcess()
	DeferCleanup(func(ctx context.Context) { Expect(p.StartOperator(ctx)).To(Succeed()) })
	pid, running := op.Running()
	Expect(running).To(BeTrue())
	Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	Eventually(func() bool { _, running := op.Running(); return running }).Should(BeFalse())
	return func(ctx context.Context) { Expect(p.StartOperator(ctx)).To(Succeed()) }
}

// crashPods crashes pods of the real node as a machine failure would: each is deleted
// without grace and its processes (found by the pod's cgroup) get SIGKILL at once, before
// any preStop hook or graceful shutdown can run.
func crashPods(ctx context.Context, pods ...corev1.Pod) {
	GinkgoHelper()
	cfg := platform.DefaultConfig(os.Getenv("KILN_ROOT"))
	for _, pod := range pods {
		Expect(pod.Spec.NodeName).To(Equal(platform.RealNodeName), "pod %s is not on the real node", pod.Name)
		err := k8s.Delete(ctx, &pod, client.GracePeriodSeconds(0))
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		Eventually(func() []int {
			pids := cfg.PodPIDs(string(pod.UID))
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return pids
		}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(BeEmpty())
	}
}

// operatorLease is the operator's leader election Lease.
const operatorLease = "kiln-operator.trainer.kubeflow.org"

// killOperatorPods scales the chart's operator to zero, its pods deleted without grace.
func killOperatorPods() (start func(context.Context)) {
	deploy := "deployment/" + platform.ReleaseName + "-operator"
	out, err := kubectl("", "-n", platform.APIServerNamespace, "get", deploy, "-o", "jsonpath={.spec.replicas}")
	Expect(err).NotTo(HaveOccurred(), out)
	replicas := out
	// Back means leading again: the killed leader never released its Lease, so a new pod
	// takes over when the Lease expires (15s), as after any crash in a cluster.
	start = func(ctx context.Context) {
		out, err := kubectl("", "-n", platform.APIServerNamespace, "scale", deploy, "--replicas="+replicas)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl("", "-n", platform.APIServerNamespace, "rollout", "status", deploy, "--timeout=2m")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(ctx, func(g Gomega) {
			lease := &coordinationv1.Lease{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: platform.APIServerNamespace, Name: operatorLease}, lease)).To(Succeed())
			g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(platform.APIServerNamespace), client.MatchingLabels{"app.kubernetes.io/component": "operator"})).To(Succeed())
			var holders []string
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					holders = append(holders, p.Name)
				}
			}
			holder, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
			g.Expect(holders).To(ContainElement(holder))
		}).WithTimeout(time.Minute).Should(Succeed())
	}
	DeferCleanup(start)
	out, err = kubectl("", "-n", platform.APIServerNamespace, "scale", deploy, "--replicas=0")
	Expect(err).NotTo(HaveOccurred(), out)
	pods := &corev1.PodList{}
	Expect(k8s.List(context.Background(), pods, client.InNamespace(platform.APIServerNamespace), client.MatchingLabels{"app.kubernetes.io/component": "operator"})).To(Succeed())
	crashPods(context.Background(), pods.Items...)
	return start
}

// webhooksFailOpen lets TrainJob writes pass while the operator's webhooks are down, until
// the spec ends.
func webhooksFailOpen(ctx context.Context) {
	policy := func(p string) {
		for _, kind := range []string{"mutatingwebhookconfiguration/trainjob-defaulter.kiln.dev", "validatingwebhookconfiguration/kiln-trainjob-validator"} {
			// Every webhook of the configuration (the validator's also serves CronTrainJobs).
			names, err := kubectl("", "get", kind, "-o", `jsonpath={range .webhooks[*]}{.name}{"\n"}{end}`)
			Expect(err).NotTo(HaveOccurred(), names)
			var ops []string
			for i := range strings.Fields(names) {
				ops = append(ops, fmt.Sprintf(`{"op":"replace","path":"/webhooks/%d/failurePolicy","value":%q}`, i, p))
			}
			out, err := kubectl("", "patch", kind, "--type=json", "-p", "["+strings.Join(ops, ",")+"]")
			Expect(err).NotTo(HaveOccurred(), out)
		}
	}
	policy("Ignore")
	DeferCleanup(func() { policy("Fail") })
}

// events lists the events about one object with one reason.
func events(ctx context.Context, g Gomega, ns, name, reason string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// eventsOf is a namespace's events, oldest first, a line each: what a failure message shows.
func eventsOf(ctx context.Context, ns string) string {
	list := &eventsv1.EventList{}
	if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "%s %s/%s %s: %s\n", e.CreationTimestamp.Format(time.TimeOnly), e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note)
	}
	return b.String()
}

// Serial: it kills the operator, which every other spec relies on.
var _ = Describe("TrainJob lifecycle across operator restarts", Serial, func() {
	It("fires a deadline that passed while the operator was killed as soon as it is back", func(ctx context.Context) {

		ns := newNamespace(ctx, "restart")
		tj := torchJob(ns, "unattended", 1).ActiveDeadlineSeconds(5).RuntimePatch(podPatch("node", map[string]string{annDuration: "300s"})).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		var due time.Time
		Eventually(ctx, func(g Gomega) {
			got := getTrainJob(ctx, g, ns, "unattended")
			g.Expect(got.Status.StartTime).NotTo(BeNil())
			due = got.Status.StartTime.Add(5 * time.Second)
		}).Should(Succeed())

		By("killing the operator before the deadline")
		start := killOperator()
		time.Sleep(time.Until(due) + 2*time.Second)
		Expect(framework.HasCondition(getTrainJob(ctx, Default, ns, "unattended"), trainer.TrainJobFailed, metav1.ConditionTrue, "")).To(BeFalse(),
			"nothing acts while the operator is down")

		By("starting it after the deadline")
		start(ctx)
		back := time.Now()
		got := waitCondition(ctx, ns, "unattended", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
		// On start-up, not at a periodic resync (hours away): seconds, with room for a busy
		// 2-core machine (6.2 s seen once in CI).
		Expect(time.Since(back)).To(BeNumerically("<", 15*time.Second), "fired right after the restart")
		Expect(got.Status.CompletionTime.Time).To(BeTemporally(">=", due.Add(-time.Second)))
	})

	It("deletes, once, a TrainJob whose TTL passed while the operator was killed", func(ctx context.Context) {
		ns := newNamespace(ctx, "restart-ttl")
		tj := torchJob(ns, "finished", 1).TTLSecondsAfterFinished(4).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		done := waitCondition(ctx, ns, "finished", trainer.TrainJobComplete, metav1.ConditionTrue, "")
		due := done.Status.CompletionTime.Add(4 * time.Second)

		By("killing the operator before the TTL is due")
		start := killOperator()
		time.Sleep(time.Until(due) + 2*time.Second)
		Expect(getTrainJob(ctx, Default, ns, "finished").DeletionTimestamp).To(BeNil(), "nothing acts while the operator is down")

		By("starting it after the TTL")
		start(ctx)
		back := time.Now()
		Eventually(ctx, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tj), &trainer.TrainJob{}))
		}).Should(BeTrue())
		Expect(time.Since(back)).To(BeNumerically("<", 5*time.Second), "deleted right after the restart")
		// The event is written in the background, after the deletion: there once, then stays one.
		announcedOnce := func(g Gomega) {
			evs := events(ctx, g, ns, "finished", "TTLExpired")
			g.Expect(evs).To(HaveLen(1))
			g.Expect(evs[0].Series).To(BeNil(), "one deletion, announced once")
		}
		Eventually(ctx, announcedOnce).Should(Succeed())
		Consistently(ctx, announcedOnce).WithTimeout(3 * time.Second).Should(Succeed())
	})

	It("counts a resume made while the operator was down from the resume, not from the restart", func(ctx context.Context) {
		ns := newNamespace(ctx, "restart-resume")
		tj := torchJob(ns, "paused", 1).Suspend(true).ActiveDeadlineSeconds(8).RuntimePatch(podPatch("node", map[string]string{annDuration: "300s"})).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		waitCondition(ctx, ns, "paused", trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)

		By("resuming it while the operator is down")
		// In a cluster a standby replica serves the webhooks while the leader is gone; here
		// the one operator process serves both, so its webhooks are skipped meanwhile.
		webhooksFailOpen(ctx)
		start := killOperator()
		// The resume happens somewhere in this interval: the apiserver records the write when
		// the request arrives, and the request may wait up to the webhooks' 10s timeout for a
		// webhook whose pod was just killed (its Service still routing there) before failing
		// open.
		sent := time.Now()
		out, err := kubectl("", "patch", "trainjob", "paused", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":false}}`)
		Expect(err).NotTo(HaveOccurred(), out)
		resumed := time.Now()
		time.Sleep(4 * time.Second)

		By("starting the operator 4 seconds later")
		start(ctx)
		back := time.Now()
		got := waitCondition(ctx, ns, "paused", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
		// Times in status have whole seconds.
		Expect(got.Status.StartTime.Time).To(And(
			BeTemporally(">=", sent.Truncate(time.Second)),
			BeTemporally("<=", resumed.Add(500*time.Millisecond))), "the clock started at the resume (sent %s, answered %s), not at the restart (%s)",
			sent.Format(time.StampMilli), resumed.Format(time.StampMilli), back.Format(time.StampMilli))
		// Due 8s after the resume, or as soon as the operator is back if it is back later
		// (a new leader of the chart's install waits for the old Lease to expire).
		due := got.Status.StartTime.Add(8 * time.Second)
		if back.After(due) {
			due = back
		}
		Expect(got.Status.CompletionTime.Time).To(BeTemporally("<", due.Add(2*time.Second)), "the deadline did not wait for the operator")
	})
})
