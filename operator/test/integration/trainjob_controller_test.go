package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/runtimes"
)

func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "op-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// namespacedTorchRuntime creates a TrainingRuntime from the catalog's torch-distributed.
func namespacedTorchRuntime(ctx context.Context, ns, name string) *trainer.TrainingRuntime {
	rt, err := runtimes.ClusterTrainingRuntime("torch-distributed")
	Expect(err).NotTo(HaveOccurred())
	out := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: rt.Spec}
	Expect(k8s.Create(ctx, out)).To(Succeed())
	return out
}

// runtimeHash is the hash the defaulting webhook stamps the jobs of rt with.
func runtimeHash(rt *trainer.TrainingRuntime) string {
	_, hash, err := trainer.EncodeRuntimeSnapshot(&trainer.RuntimeSnapshot{Kind: trainer.TrainingRuntimeKind, Name: rt.Name, Spec: rt.Spec})
	Expect(err).NotTo(HaveOccurred())
	return hash
}

func newTrainJob(ns, name, runtime string) *trainer.TrainJob {
	return kilntesting.MakeTrainJob(name, ns).RuntimeRef(trainer.TrainingRuntimeKind, runtime).
		NumNodes(2).Command("torchrun", "train.py").Obj()
}

func jobSetOf(ctx context.Context, g Gomega, tj *trainer.TrainJob) *jobsetv1alpha2.JobSet {
	js := &jobsetv1alpha2.JobSet{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), js)).To(Succeed())
	return js
}

func condition(ctx context.Context, g Gomega, tj *trainer.TrainJob, t string) *metav1.Condition {
	got := &trainer.TrainJob{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
	return meta.FindStatusCondition(got.Status.Conditions, t)
}

// setJobSetCondition plays the JobSet controller.
func setJobSetCondition(ctx context.Context, tj *trainer.TrainJob, t jobsetv1alpha2.JobSetConditionType, reason, message string) {
	Eventually(ctx, func(g Gomega) {
		js := jobSetOf(ctx, g, tj)
		meta.SetStatusCondition(&js.Status.Conditions, metav1.Condition{Type: string(t), Status: metav1.ConditionTrue, Reason: reason, Message: message})
		js.Status.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Succeeded: 1}}
		g.Expect(k8s.Status().Update(ctx, js)).To(Succeed())
	}).Should(Succeed())
}

var _ = Describe("TrainJob controller", func() {
	It("renders the JobSet, owned by the TrainJob, and pins the runtime: one snapshot for the jobs of a runtime version, deleted when no job names it", func(ctx context.Context) {
		ns := newNamespace(ctx)
		rt := namespacedTorchRuntime(ctx, ns, "torch")
		hash := runtimeHash(rt)
		tj, other := newTrainJob(ns, "train", "torch"), newTrainJob(ns, "other", "torch")
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Expect(k8s.Create(ctx, other)).To(Succeed())
		Expect(tj.Annotations).To(HaveKeyWithValue(trainer.AnnotationRuntimeSnapshot, hash), "stamped at admission with its runtime's hash")
		Eventually(ctx, func(g Gomega) {
			js := jobSetOf(ctx, g, tj)
			g.Expect(metav1.IsControlledBy(js, tj)).To(BeTrue())
			g.Expect(js.Spec.ReplicatedJobs).To(HaveLen(1))
			g.Expect(js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism).To(HaveValue(BeEquivalentTo(2)))
			jobSetOf(ctx, g, other)
		}).Should(Succeed())
		cms := &corev1.ConfigMapList{}
		Expect(k8s.List(ctx, cms, client.InNamespace(ns), client.HasLabels{trainer.LabelRuntimeSnapshot})).To(Succeed())
		Expect(cms.Items).To(HaveLen(1), "one snapshot for both jobs")
		Expect(cms.Items[0].Name).To(Equal(trainer.SharedRuntimeSnapshotName(hash)))
		Expect(cms.Items[0].OwnerReferences).To(BeEmpty())

		By("deleting one job, then the other: the sweep deletes the snapshot once no job names it")
		Expect(k8s.Delete(ctx, tj)).To(Succeed())
		Consistently(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&cms.Items[0]), &corev1.ConfigMap{})).To(Succeed())
		}).WithTimeout(3 * snapshotSweep).Should(Succeed())
		Expect(k8s.Delete(ctx, other)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(&cms.Items[0]), &corev1.ConfigMap{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the snapshot: %v", err)
		}).WithTimeout(10 * snapshotSweep).Should(Succeed())
	})

	It("keeps rendering from the runtime as it was at the first reconcile", func(ctx context.Context) {
		ns := newNamespace(ctx)
		rt := namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "pinned", "torch")
		tj.Spec.Suspend = ptr.To(true)
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) { jobSetOf(ctx, g, tj) }).Should(Succeed())
		original := rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image

		By("editing the runtime's image")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(rt), rt)).To(Succeed())
		rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = "example.com/edited:latest"
		Expect(k8s.Update(ctx, rt)).To(Succeed())

		By("resuming, which re-renders the JobSet")
		Expect(updateTrainJob(ctx, tj, func(tj *trainer.TrainJob) {
			tj.Spec.Suspend = ptr.To(false)
		})).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			js := jobSetOf(ctx, g, tj)
			g.Expect(js.Spec.Suspend).To(HaveValue(BeFalse()))
			g.Expect(js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image).To(Equal(original))
		}).Should(Succeed())
	})

	It("propagates suspend and resume, with conditions", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "pause", "torch")
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) { g.Expect(jobSetOf(ctx, g, tj).Spec.Suspend).To(HaveValue(BeFalse())) }).Should(Succeed())

		Expect(updateTrainJob(ctx, tj, func(tj *trainer.TrainJob) {
			tj.Spec.Suspend = ptr.To(true)
		})).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(jobSetOf(ctx, g, tj).Spec.Suspend).To(HaveValue(BeTrue()))
			c := condition(ctx, g, tj, trainer.TrainJobSuspended)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(trainer.TrainJobSuspendedReason))
		}).Should(Succeed())

		Expect(updateTrainJob(ctx, tj, func(tj *trainer.TrainJob) {
			tj.Spec.Suspend = ptr.To(false)
		})).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(jobSetOf(ctx, g, tj).Spec.Suspend).To(HaveValue(BeFalse()))
			c := condition(ctx, g, tj, trainer.TrainJobSuspended)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(trainer.TrainJobResumedReason))
		}).Should(Succeed())
	})

	It("removes from the JobSet what a manager removes from its runtime patch, by the resume", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "patched", "torch")
		tj.Spec.Suspend = ptr.To(true)
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: trainer.KueueManager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
			Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
				Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"pool": "gpu"}}},
			}}}}},
		}}}}
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(jobSetOf(ctx, g, tj).Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("pool", "gpu"))
		}).Should(Succeed())

		By("Kueue clearing its patch after a preemption, then the job resumed")
		Expect(updateTrainJob(ctx, tj, func(tj *trainer.TrainJob) {
			tj.Spec.RuntimePatches = nil
		})).To(Succeed())
		// While both stay suspended the JobSet is left as it is (no pod runs from it): the
		// change reaches it with the resume, in one update.
		Expect(updateTrainJob(ctx, tj, func(tj *trainer.TrainJob) {
			tj.Spec.Suspend = ptr.To(false)
		})).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			js := jobSetOf(ctx, g, tj)
			g.Expect(js.Spec.Suspend).To(HaveValue(BeFalse()))
			g.Expect(js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector).To(BeEmpty())
		}).Should(Succeed())
	})

	It("reports completion and never recreates the JobSet of a finished TrainJob", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "done", "torch")
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) { jobSetOf(ctx, g, tj) }).Should(Succeed())
		setJobSetCondition(ctx, tj, jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully")
		Eventually(ctx, func(g Gomega) {
			c := condition(ctx, g, tj, trainer.TrainJobComplete)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal("AllJobsCompleted"))
			got := &trainer.TrainJob{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
			g.Expect(got.Status.JobsStatus).To(ConsistOf(And(HaveField("Name", "node"), HaveField("Succeeded", HaveValue(BeEquivalentTo(1))))))
		}).Should(Succeed())

		By("deleting the JobSet of the finished TrainJob")
		js := &jobsetv1alpha2.JobSet{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), js)).To(Succeed())
		Expect(k8s.Delete(ctx, js)).To(Succeed())
		// Touch the TrainJob so that it is reconciled again.
		Expect(updateTrainJob(ctx, tj, func(tj *trainer.TrainJob) {
			tj.Labels = map[string]string{"touched": "true"}
		})).To(Succeed())
		Consistently(ctx, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}))
		}, 2*time.Second).Should(BeTrue())
		Expect(condition(ctx, Default, tj, trainer.TrainJobComplete).Status).To(Equal(metav1.ConditionTrue))
	})

	It("reports a JobSet failure with its reason", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "broken", "torch")
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) { jobSetOf(ctx, g, tj) }).Should(Succeed())
		setJobSetCondition(ctx, tj, jobsetv1alpha2.JobSetFailed, "FailedJobs", "jobset failed due to one or more job failures")
		Eventually(ctx, func(g Gomega) {
			c := condition(ctx, g, tj, trainer.TrainJobFailed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("FailedJobs"))
			g.Expect(c.Message).To(Equal("jobset failed due to one or more job failures"))
		}).Should(Succeed())
	})

	It("renders nothing for a TrainJob managed by MultiKueue, and deletes it after its TTL once the mirrored status says it finished", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "remote", "torch")
		tj.Spec.ManagedBy = ptr.To(trainer.MultiKueueControllerName)
		tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](2)
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Consistently(ctx, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}))
		}, 2*time.Second).Should(BeTrue())
		By("Kueue mirroring the worker's completion")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), tj)).To(Succeed())
		meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "done on a worker"})
		Expect(k8s.Status().Update(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			got := &trainer.TrainJob{}
			err := k8s.Get(ctx, client.ObjectKeyFromObject(tj), got)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "completionTime %v", got.Status.CompletionTime)
		}).WithTimeout(20 * time.Second).Should(Succeed())
	})

	It("fails clearly while the runtime is missing and recovers once it exists", func(ctx context.Context) {
		ns := newNamespace(ctx)
		tj := newTrainJob(ns, "early", "late-runtime")
		tj.Labels = map[string]string{labelSkipAdmission: "true"}
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			c := condition(ctx, g, tj, trainer.TrainJobFailed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(trainer.TrainJobRuntimeNotFoundReason))
			g.Expect(c.Message).To(ContainSubstring(`TrainingRuntime "late-runtime" not found`))
			g.Expect(c.Message).To(ContainSubstring("spec.runtimeRef"))
		}).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			events := &corev1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(HaveField("Reason", "RuntimeNotFound")))
		}).Should(Succeed())

		By("creating the runtime")
		namespacedTorchRuntime(ctx, ns, "late-runtime")
		Eventually(ctx, func(g Gomega) {
			jobSetOf(ctx, g, tj)
			c := condition(ctx, g, tj, trainer.TrainJobFailed)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(trainer.TrainJobRuntimeFoundReason))
		}).Should(Succeed())
	})
})

var _ = Describe("A TrainJob re-created under the name of a deleted one", func() {
	It("never takes the old JobSet's status, and gets its own once the old one is gone", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		old := newTrainJob(ns, "again", "torch")
		Expect(k8s.Create(ctx, old)).To(Succeed())
		Eventually(func(g Gomega) { jobSetOf(ctx, g, old) }).Should(Succeed())
		setJobSetCondition(ctx, old, jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully")
		Eventually(func(g Gomega) {
			g.Expect(condition(ctx, g, old, trainer.TrainJobComplete)).NotTo(BeNil())
		}).Should(Succeed())
		// envtest runs no garbage collector: the old JobSet outlives its TrainJob, as it
		// does for a moment in a cluster.
		Expect(k8s.Delete(ctx, old)).To(Succeed())

		again := newTrainJob(ns, "again", "torch")
		Expect(k8s.Create(ctx, again)).To(Succeed())
		Consistently(func(g Gomega) {
			got := &trainer.TrainJob{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(again), got)).To(Succeed())
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobComplete)).To(BeNil(), "the old job's completion")
			g.Expect(got.Status.CompletionTime).To(BeNil())
		}, 2*time.Second).Should(Succeed())

		// What the garbage collector would delete: the old job's JobSet (both jobs share the
		// namespace's snapshot of their runtime).
		oldJS := &jobsetv1alpha2.JobSet{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(again), oldJS)).To(Succeed())
		Expect(k8s.Delete(ctx, oldJS)).To(Succeed())
		Eventually(func(g Gomega) {
			js := jobSetOf(ctx, g, again)
			g.Expect(metav1.IsControlledBy(js, again)).To(BeTrue())
		}).Should(Succeed())
	})
})

var _ = Describe("Runtime snapshot conflicts", func() {
	It("renders nothing over someone else's ConfigMap under the snapshot's name, and says so", func(ctx context.Context) {
		ns := newNamespace(ctx)
		rt := namespacedTorchRuntime(ctx, ns, "torch")
		// Not labelled as a snapshot, so not in the list the controller loads: the conflict
		// shows only when it tries to create the snapshot of the job's runtime.
		squatted := trainer.SharedRuntimeSnapshotName(runtimeHash(rt))
		Expect(k8s.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: squatted},
			Data:       map[string]string{"app.yaml": "someone else's"},
		})).To(Succeed())
		tj := newTrainJob(ns, "squatted", "torch")
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			evs := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range evs.Items {
				if e.Regarding.Name == tj.Name && e.Type == corev1.EventTypeWarning {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ContainElement(ContainSubstring("ConfigMap " + squatted + " is in the way of the snapshot of runtime torch")))
		}).Should(Succeed())
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{}))).To(BeTrue())

		By("deleting the ConfigMap in the way")
		Expect(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: squatted}})).To(Succeed())
		Eventually(ctx, func(g Gomega) { jobSetOf(ctx, g, tj) }).WithTimeout(time.Minute).Should(Succeed())
	})
})
