package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

var _ = Describe("TrainJob lifecycle", func() {
	It("fails a TrainJob at its deadline and deletes its JobSet", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "deadline", "torch")
		tj.Spec.ActiveDeadlineSeconds = ptr.To[int64](2)
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) { jobSetOf(ctx, g, tj) }).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			c := condition(ctx, g, tj, trainer.TrainJobFailed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(trainer.TrainJobDeadlineExceededReason))
			g.Expect(c.Message).To(Equal("TrainJob exceeded its active deadline"))
		}).Should(Succeed())
		got := &trainer.TrainJob{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
		Expect(got.Status.StartTime).NotTo(BeNil())
		Expect(got.Status.CompletionTime).NotTo(BeNil())
		Expect(got.Status.CompletionTime.Sub(got.Status.StartTime.Time)).To(BeNumerically(">=", 2*time.Second))
		Eventually(ctx, func() bool {
			js := &jobsetv1alpha2.JobSet{}
			err := k8s.Get(ctx, client.ObjectKeyFromObject(tj), js)
			return apierrors.IsNotFound(err) || !js.DeletionTimestamp.IsZero()
		}).Should(BeTrue(), "the JobSet of a TrainJob past its deadline is deleted")
	})

	It("does not count suspended time", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "paused", "torch")
		tj.Spec.ActiveDeadlineSeconds = ptr.To[int64](3)
		tj.Spec.Suspend = ptr.To(true)
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Consistently(ctx, func(g Gomega) {
			got := &trainer.TrainJob{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
			g.Expect(got.Status.StartTime).To(BeNil())
			g.Expect(condition(ctx, g, tj, trainer.TrainJobFailed)).To(BeNil())
		}, 4*time.Second).Should(Succeed())

		Expect(updateTrainJob(ctx, tj, func(tj *trainer.TrainJob) {
			tj.Spec.Suspend = ptr.To(false)
		})).To(Succeed())
		resumed := time.Now()
		Eventually(ctx, func(g Gomega) {
			c := condition(ctx, g, tj, trainer.TrainJobFailed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(trainer.TrainJobDeadlineExceededReason))
		}).Should(Succeed())
		Expect(time.Since(resumed)).To(BeNumerically(">=", 2*time.Second), "the deadline counts from the resume")
	})

	It("deletes a finished TrainJob after its TTL, taking the runtime's default", func(ctx context.Context) {
		ns := newNamespace(ctx)
		rt := namespacedTorchRuntime(ctx, ns, "torch")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(rt), rt)).To(Succeed())
		rt.Spec.RunPolicy = &trainer.RunPolicy{TTLSecondsAfterFinished: ptr.To[int32](1)}
		Expect(k8s.Update(ctx, rt)).To(Succeed())
		tj := newTrainJob(ns, "ttl", "torch")
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) { jobSetOf(ctx, g, tj) }).Should(Succeed())
		setJobSetCondition(ctx, tj, jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully")
		Eventually(ctx, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tj), &trainer.TrainJob{}))
		}).Should(BeTrue(), "the TrainJob is deleted 1s after it completed")
	})
})
