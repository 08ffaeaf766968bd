package e2e

import (
	"context"
	"maps"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// cronTrainJob is a CronTrainJob of ns whose runs train with torch-distributed on one node.
func cronTrainJob(ns, name, schedule string, policy kiln.ConcurrencyPolicy) *kiln.CronTrainJob {
	return &kiln.CronTrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kiln.CronTrainJobSpec{
			Schedule: schedule, ConcurrencyPolicy: policy,
			TrainJobTemplate: kiln.TrainJobTemplateSpec{Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
				Trainer:    &trainer.Trainer{Command: []string{"torchrun", "retrain.py"}, NumNodes: ptr.To[int32](1)},
			}},
		},
	}
}

// runsOf are the runs of a CronTrainJob, oldest scheduled first.
func runsOf(ctx context.Context, g Gomega, ns, name string) []trainer.TrainJob {
	list := &trainer.TrainJobList{}
	g.Expect(k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{kiln.LabelCronTrainJob: name})).To(Succeed())
	slices.SortFunc(list.Items, func(a, b trainer.TrainJob) int { return scheduledTime(a).Compare(scheduledTime(b)) })
	return list.Items
}

func scheduledTime(tj trainer.TrainJob) time.Time {
	t, err := time.Parse(time.RFC3339, tj.Annotations[kiln.AnnotationScheduledTime])
	Expect(err).NotTo(HaveOccurred(), "run %s has no scheduled time", tj.Name)
	return t
}

func complete(tj trainer.TrainJob) bool {
	return meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)
}

var _ = Describe("CronTrainJob on the platform", func() {
	It("fires on its schedule: a run that completes, told its scheduled time; deleting it deletes its runs", func(ctx context.Context) {
		ns := newNamespace(ctx, "cron")
		cj := cronTrainJob(ns, "every-minute", "* * * * *", kiln.ForbidConcurrent)
		Expect(k8s.Create(ctx, cj)).To(Succeed())

		var run trainer.TrainJob
		Eventually(ctx, func(g Gomega) {
			runs := runsOf(ctx, g, ns, "every-minute")
			g.Expect(runs).NotTo(BeEmpty())
			run = runs[0]
			g.Expect(complete(run)).To(BeTrue())
		}).WithTimeout(150 * time.Second).Should(Succeed())
		scheduled := scheduledTime(run)
		Expect(scheduled.Second()).To(BeZero())
		Expect(run.Spec.Trainer.Env).To(ContainElement(And(HaveField("Name", "KILN_SCHEDULED_TIME"), HaveField("Value", scheduled.UTC().Format(time.RFC3339)))))
		Expect(metav1.IsControlledBy(&run, cj)).To(BeTrue())

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cj), cj)).To(Succeed())
		Expect(cj.Status.LastScheduleTime).NotTo(BeNil())

		Expect(k8s.Delete(ctx, cj, client.PropagationPolicy("Foreground"))).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(runsOf(ctx, g, ns, "every-minute")).To(BeEmpty())
		}).Should(Succeed())
	})

	It("fires twice a minute apart, keeps only the newest finished runs, and holds a run back while a Kueue-queued one waits (Forbid); slow: a cron schedule's step is a minute", func(ctx context.Context) {
		ns := newNamespace(ctx, "cron-policy")
		smallQueue(ctx, ns)

		// Runs that complete at once; only the newest completed one is kept.
		history := cronTrainJob(ns, "history", "* * * * *", kiln.AllowConcurrent)
		history.Spec.SuccessfulJobsHistoryLimit, history.Spec.FailedJobsHistoryLimit = ptr.To[int32](1), ptr.To[int32](0)
		// Runs that Kueue never admits (16 GPUs a node; the queue's quota is 8): the first one
		// stays queued, and Forbid holds back every later one.
		forbid := cronTrainJob(ns, "forbid", "* * * * *", kiln.ForbidConcurrent)
		forbid.Spec.TrainJobTemplate.Labels = map[string]string{trainer.KueueQueueNameLabel: "queue"}
		forbid.Spec.TrainJobTemplate.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("16")},
		}
		Expect(k8s.Create(ctx, history)).To(Succeed())
		Expect(k8s.Create(ctx, forbid)).To(Succeed())

		By("two real firings of history, a minute apart, the older one deleted once the newer one completed")
		seen := map[string]time.Time{}
		Eventually(ctx, func(g Gomega) {
			runs := runsOf(ctx, g, ns, "history")
			for _, r := range runs {
				seen[r.Name] = scheduledTime(r)
			}
			g.Expect(len(seen)).To(BeNumerically(">=", 2), "runs seen: %v", seen)
			var completed []string
			for _, r := range runs {
				if complete(r) {
					completed = append(completed, r.Name)
				}
			}
			g.Expect(completed).To(HaveLen(1), "successfulJobsHistoryLimit 1 keeps one completed run")
			first := slices.MinFunc(slices.Collect(maps.Values(seen)), time.Time.Compare)
			g.Expect(runs).NotTo(ContainElement(HaveField("ObjectMeta.Name", kiln.RunName("history", first))), "the oldest run was deleted")
		}).WithTimeout(200 * time.Second).WithPolling(time.Second).Should(Succeed())
		times := slices.SortedFunc(maps.Values(seen), time.Time.Compare)
		Expect(times[1].Sub(times[0])).To(Equal(time.Minute), "consecutive minutes: %v", times)

		By("forbid: one run, still queued in Kueue after two due times, the later ones held back")
		Eventually(ctx, func(g Gomega) {
			g.Expect(events(ctx, g, ns, "forbid", "JobAlreadyActive")).NotTo(BeEmpty())
		}).Should(Succeed())
		runs := runsOf(ctx, Default, ns, "forbid")
		Expect(runs).To(HaveLen(1))
		Expect(runs[0].Spec.Suspend).To(HaveValue(BeTrue()), "Kueue has not admitted it")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(forbid), forbid)).To(Succeed())
		Expect(forbid.Status.Active).To(ConsistOf(HaveField("Name", runs[0].Name)))
		Expect(forbid.Status.LastScheduleTime.Time).To(BeTemporally("==", scheduledTime(runs[0])), "a held-back time is not recorded as scheduled")
		AddReportEntry("cron firings", seen)
	})

	// Serial: it kills the operator, which every other spec relies on.
	It("creates the run of a time that fell due while the operator was killed, once: not zero, not two; slow: waits for a minute boundary with the operator down", Serial, func(ctx context.Context) {
		ns := newNamespace(ctx, "cron-restart")
		cj := cronTrainJob(ns, "unattended", "* * * * *", kiln.AllowConcurrent)
		cj.Spec.StartingDeadlineSeconds = ptr.To[int64](120)
		Expect(k8s.Create(ctx, cj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cj), cj)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(cj.Status.Conditions, "Ready")).To(BeTrue(), "the operator has seen it")
		}).Should(Succeed())

		// The due instant the operator is down across: killed 15s before it (it has asked to
		// be woken for it, a timer the kill loses), started again 10s after it.
		now := time.Now()
		due := now.Truncate(time.Minute).Add(time.Minute)
		if due.Sub(now) < 20*time.Second {
			due = due.Add(time.Minute)
		}
		time.Sleep(time.Until(due.Add(-15 * time.Second)))
		start := killOperator()
		Expect(time.Now()).To(BeTemporally("<", due), "the operator was down before the due instant")
		time.Sleep(time.Until(due.Add(10 * time.Second)))
		restarted := time.Now()
		start(ctx)

		name := kiln.RunName("unattended", due)
		run := &trainer.TrainJob{}
		Eventually(ctx, func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, run)
		}).WithTimeout(time.Minute).Should(Succeed(), "not zero: the missed time runs when the operator is back")
		Expect(run.CreationTimestamp.Time).To(BeTemporally(">=", restarted.Truncate(time.Second)), "created by the restarted operator")
		AddReportEntry("run after restart", run.CreationTimestamp.Sub(restarted).Round(time.Second).String())
		Consistently(ctx, func(g Gomega) {
			var forDue []string
			for _, r := range runsOf(ctx, g, ns, "unattended") {
				if scheduledTime(r).Equal(due) {
					forDue = append(forDue, r.Name)
				}
				g.Expect(scheduledTime(r)).To(BeTemporally("<=", time.Now()), "no run ahead of its time")
			}
			g.Expect(forDue).To(Equal([]string{name}), "not two")
		}).WithTimeout(5 * time.Second).Should(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cj), cj)).To(Succeed())
		Expect(cj.Status.LastScheduleTime.Time).To(BeTemporally(">=", due))
	})
})
