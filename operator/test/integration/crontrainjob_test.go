package integration

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func newCronTrainJob(ns, name string, mutate func(*kiln.CronTrainJob)) *kiln.CronTrainJob {
	cj := &kiln.CronTrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: kiln.CronTrainJobSpec{
			Schedule: "0 2 * * 0", TimeZone: ptr.To("Europe/Berlin"), ConcurrencyPolicy: kiln.ForbidConcurrent,
			SuccessfulJobsHistoryLimit: ptr.To[int32](1), FailedJobsHistoryLimit: ptr.To[int32](1),
			TrainJobTemplate: kiln.TrainJobTemplateSpec{Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: "torch", Kind: ptr.To(trainer.TrainingRuntimeKind)},
				Trainer:    &trainer.Trainer{Command: []string{"torchrun", "retrain.py"}},
			}},
		},
	}
	if mutate != nil {
		mutate(cj)
	}
	return cj
}

// tick makes the controller look at cj again (after the spec moved its clock).
func tick(ctx context.Context, cj *kiln.CronTrainJob) {
	GinkgoHelper()
	Eventually(ctx, func() error {
		cur := &kiln.CronTrainJob{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(cj), cur); err != nil {
			return err
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations["test.kiln.dev/tick"] = cronClock.Now().Format(time.RFC3339Nano)
		return k8s.Update(ctx, cur)
	}).Should(Succeed())
}

// runNames are the names of cj's TrainJobs.
func runNames(ctx context.Context, cj *kiln.CronTrainJob) func() []string {
	return func() []string {
		list := &trainer.TrainJobList{}
		Expect(k8s.List(ctx, list, client.InNamespace(cj.Namespace), client.MatchingLabels{kiln.LabelCronTrainJob: cj.Name})).To(Succeed())
		var out []string
		for _, tj := range list.Items {
			if tj.DeletionTimestamp.IsZero() {
				out = append(out, tj.Name)
			}
		}
		return out
	}
}

func complete(ctx context.Context, ns, name string) {
	GinkgoHelper()
	tj := &trainer.TrainJob{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj)).To(Succeed())
	setJobSetCondition(ctx, tj, jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully")
	Eventually(ctx, func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), tj)).To(Succeed())
		g.Expect(tj.Status.Conditions).To(ContainElement(HaveField("Type", trainer.TrainJobComplete)))
	}).Should(Succeed())
}

var _ = Describe("CronTrainJob controller", Serial, func() {
	It("creates each run once when due, in its time zone; Forbid holds one back; history is trimmed; missed times run once", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		berlin, err := time.LoadLocation("Europe/Berlin")
		Expect(err).NotTo(HaveOccurred())
		cronClock.SetTime(time.Now())
		cj := newCronTrainJob(ns, "weekly", nil)
		Expect(k8s.Create(ctx, cj)).To(Succeed())

		// Nothing is due before Sunday 02:00 in Berlin.
		tick(ctx, cj)
		Consistently(ctx, runNames(ctx, cj), "1s").Should(BeEmpty())
		// The first Sunday 02:00 after the CronTrainJob was created (each from the date: adding
		// weeks to a time would carry the hour DST moved 02:00 to on 2026-03-29).
		var sunday time.Time
		for week := 0; !sunday.After(cj.CreationTimestamp.Time); week++ {
			sunday = time.Date(2026, 1, 4+7*week, 2, 0, 0, 0, berlin)
		}

		cronClock.SetTime(sunday.Add(30 * time.Second))
		tick(ctx, cj)
		first := kiln.RunName("weekly", sunday)
		Eventually(ctx, runNames(ctx, cj)).Should(ConsistOf(first))
		run := &trainer.TrainJob{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, run)).To(Succeed())
		Expect(metav1.IsControlledBy(run, cj)).To(BeTrue())
		Expect(run.Spec.Trainer.Env).To(ContainElement(HaveField("Value", sunday.UTC().Format(time.RFC3339))))
		Expect(run.Annotations).To(HaveKeyWithValue(kiln.AnnotationScheduledTime, sunday.UTC().Format(time.RFC3339)))
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cj), cj)).To(Succeed())
			g.Expect(cj.Status.ActiveCount).To(BeEquivalentTo(1))
			g.Expect(cj.Status.LastScheduleTime.Time).To(BeTemporally("==", sunday))
		}).Should(Succeed())

		// A week later the first run is still active (queued or running): Forbid holds the
		// second back, and the time stays due.
		second := sunday.AddDate(0, 0, 7)
		cronClock.SetTime(second.Add(30 * time.Second))
		tick(ctx, cj)
		Consistently(ctx, runNames(ctx, cj), "2s").Should(ConsistOf(first))
		// The first finishes: the held-back run starts (no startingDeadlineSeconds).
		complete(ctx, ns, first)
		tick(ctx, cj)
		Eventually(ctx, runNames(ctx, cj)).Should(ConsistOf(first, kiln.RunName("weekly", second)))

		// The second finishes: one successful run is kept, the newest.
		complete(ctx, ns, kiln.RunName("weekly", second))
		tick(ctx, cj)
		Eventually(ctx, runNames(ctx, cj)).Should(ConsistOf(kiln.RunName("weekly", second)))

		// The operator was away for three weeks: one run, the latest, not three.
		latest := second.AddDate(0, 0, 21)
		cronClock.SetTime(latest.Add(time.Hour))
		tick(ctx, cj)
		Eventually(ctx, runNames(ctx, cj)).Should(ConsistOf(kiln.RunName("weekly", second), kiln.RunName("weekly", latest)))
		Consistently(ctx, runNames(ctx, cj), "1s").Should(HaveLen(2))

		// A status write that was lost (lastScheduleTime behind): the run exists by its
		// name, so no second one is created.
		Eventually(ctx, func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(cj), cj); err != nil {
				return err
			}
			cj.Status.LastScheduleTime = &metav1.Time{Time: second}
			return k8s.Status().Update(ctx, cj)
		}).Should(Succeed())
		tick(ctx, cj)
		Consistently(ctx, runNames(ctx, cj), "1s").Should(HaveLen(2))
	})

	It("refuses a schedule that does not parse, an unknown time zone, and a template whose runs would be refused", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		for _, tc := range []struct {
			name        string
			mutate      func(*kiln.CronTrainJob)
			field, text string
		}{
			{"bad-schedule", func(cj *kiln.CronTrainJob) { cj.Spec.Schedule = "61 2 * * *" }, "spec.schedule", "above maximum (59)"},
			{"six-fields", func(cj *kiln.CronTrainJob) { cj.Spec.Schedule = "0 0 2 * * 0" }, "spec.schedule", "want 5 (minute hour day-of-month month day-of-week)"},
			{"bad-zone", func(cj *kiln.CronTrainJob) { cj.Spec.TimeZone = ptr.To("Mars/Olympus_Mons") }, "spec.timeZone", "use an IANA name such as Europe/Berlin"},
			{"no-runtime", func(cj *kiln.CronTrainJob) { cj.Spec.TrainJobTemplate.Spec.RuntimeRef.Name = "nope" }, "spec.trainJobTemplate.spec.runtimeRef.name", `"nope" not found`},
			{"zero-nodes", func(cj *kiln.CronTrainJob) { cj.Spec.TrainJobTemplate.Spec.Trainer.NumNodes = ptr.To[int32](0) }, "spec.trainJobTemplate.spec.trainer.numNodes", "must be at least 1"},
			{strings.Repeat("a", 45), nil, "metadata.name", "its runs are named"},
		} {
			err := k8s.Create(ctx, newCronTrainJob(ns, tc.name, tc.mutate))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", tc.name, err)
			Expect(err.Error()).To(And(ContainSubstring(tc.field), ContainSubstring(tc.text)), tc.name)
		}
		// Nothing was stored.
		left := &kiln.CronTrainJobList{}
		Expect(k8s.List(ctx, left, client.InNamespace(ns))).To(Succeed())
		Expect(left.Items).To(BeEmpty())
	})
})
