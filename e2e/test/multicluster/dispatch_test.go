package multicluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	"github.com/kiln-ml/kiln/api/kueue"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/test/framework"
)

// dispatched is a one-node TrainJob of 4 GPUs in the manager's dispatching queue; its pods
// run for run (simulated on the workers' KWOK nodes).
func dispatched(name string, run time.Duration) *kilntesting.TrainJobWrapper {
	gpus := resource.MustParse("4")
	return kilntesting.MakeTrainJob(name, platform.DefaultNamespace).Queue(platform.MultiClusterQueue).NumNodes(1).Command("torchrun", "train.py").
		ResourcesPerNode(corev1.ResourceRequirements{
			Requests: corev1.ResourceList{platform.ResourceGPU: gpus}, Limits: corev1.ResourceList{platform.ResourceGPU: gpus},
		}).
		RuntimePatch(platform.SimulatedPods("e2e.kiln.dev/simulation", trainer.NodeName, map[string]string{platform.AnnotationSimDuration: run.String()}))
}

// workerCluster is the worker the manager's Workload of the job names, "" when none.
func workerCluster(ctx context.Context, g Gomega, tj *trainer.TrainJob) string {
	list := &kueuev1beta2.WorkloadList{}
	g.Expect(manager.List(ctx, list, client.InNamespace(tj.Namespace), client.MatchingLabels{trainer.KueueJobUIDLabel: string(tj.UID)})).To(Succeed())
	return kueue.WorkerCluster(list.Items)
}

// ranOn counts, by worker, the JobSets each worker's Kiln created for jobs of prefix: the
// events of their creation outlive the copies, which MultiKueue deletes once they finish.
func ranOn(ctx context.Context, g Gomega, prefix string) map[string][]string {
	out := map[string][]string{}
	for name, w := range workers {
		evs := &corev1.EventList{}
		g.Expect(w.List(ctx, evs, client.InNamespace(platform.DefaultNamespace))).To(Succeed())
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == trainer.TrainJobKind && e.Reason == "Created" && strings.HasPrefix(e.InvolvedObject.Name, prefix) {
				out[e.InvolvedObject.Name] = append(out[e.InvolvedObject.Name], name)
			}
		}
	}
	return out
}

var _ = Describe("MultiKueue dispatch", func() {
	It("runs each job on exactly one worker, mirrors its status, and deletes it everywhere after its TTL", func(ctx context.Context) {
		const n, kept = 50, 2
		prefix := "mk-" + rand.String(4) + "-"
		By(fmt.Sprintf("submitting %d TrainJobs to the manager's queue %s", n, platform.MultiClusterQueue))
		for i := range n {
			w := dispatched(fmt.Sprintf("%s%02d", prefix, i), 2*time.Second)
			if i >= kept {
				w = w.TTLSecondsAfterFinished(5)
			}
			Expect(manager.Create(ctx, w.Obj())).To(Succeed())
		}

		By("the jobs without a TTL: Complete on the manager, with the worker's times and cluster")
		for i := range kept {
			key := client.ObjectKey{Namespace: platform.DefaultNamespace, Name: fmt.Sprintf("%s%02d", prefix, i)}
			Eventually(ctx, func(g Gomega) {
				tj := &trainer.TrainJob{}
				g.Expect(manager.Get(ctx, key, tj)).To(Succeed())
				g.Expect(tj.Spec.ManagedBy).To(HaveValue(Equal(trainer.MultiKueueControllerName)), "Kueue's webhook hands jobs of a MultiKueue queue to MultiKueue")
				g.Expect(meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)).To(BeTrue(), "conditions %+v", tj.Status.Conditions)
				g.Expect(tj.Status.CompletionTime).NotTo(BeNil(), "completionTime from the worker's completion")
				g.Expect(tj.Status.StartTime).NotTo(BeNil(), "startTime from the worker's resume")
				g.Expect(tj.Status.StartTime.Time).NotTo(BeTemporally(">", tj.Status.CompletionTime.Time))
				g.Expect(workers).To(HaveKey(workerCluster(ctx, g, tj)))
			}).WithTimeout(5 * time.Minute).Should(Succeed())
		}

		By("kiln, against the manager's API server, shows where a job runs and where its logs are")
		one := fmt.Sprintf("%s%02d", prefix, 0)
		// The API server reads its caches: eventually what the manager's apiserver showed above.
		Eventually(ctx, func(g Gomega) {
			out, errOut, code := kilnCLI("list", "-o", "wide")
			g.Expect(code).To(BeZero(), errOut)
			g.Expect(out).To(MatchRegexp(`(?m)^` + one + `\t.*\tkiln-worker-[12]$`))
			out, errOut, code = kilnCLI("describe", one)
			g.Expect(code).To(BeZero(), errOut)
			g.Expect(out).To(MatchRegexp(`Cluster:\s+kiln-worker-[12] \(dispatched by MultiKueue`))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		_, errOut, code := kilnCLI("logs", one)
		Expect(code).NotTo(BeZero())
		Expect(errOut).To(MatchRegexp(`runs on worker cluster kiln-worker-[12] .*kubectl -n default logs -l jobset.sigs.k8s.io/jobset-name=` + one))

		By("every job with a TTL deleted on the manager and on the workers")
		Eventually(ctx, func(g Gomega) {
			for name, c := range map[string]client.Client{"manager": manager, "kiln-worker-1": workers[plat.WorkerName(1)], "kiln-worker-2": workers[plat.WorkerName(2)]} {
				list := &trainer.TrainJobList{}
				g.Expect(c.List(ctx, list, client.InNamespace(platform.DefaultNamespace))).To(Succeed())
				var left []string
				for _, tj := range list.Items {
					if strings.HasPrefix(tj.Name, prefix) && !(name == "manager" && tj.Name < fmt.Sprintf("%s%02d", prefix, kept)) {
						left = append(left, tj.Name)
					}
				}
				g.Expect(left).To(BeEmpty(), "TrainJobs left on %s", name)
			}
		}).WithTimeout(8 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		By("each job ran on exactly one worker, and both workers ran some")
		runs := ranOn(ctx, Default, prefix)
		perWorker := map[string]int{}
		for job, on := range runs {
			Expect(on).To(HaveLen(1), "job %s ran on %v", job, on)
			perWorker[on[0]]++
		}
		Expect(runs).To(HaveLen(n))
		for name := range workers {
			Expect(perWorker[name]).To(BeNumerically(">", 0), "jobs per worker: %v", perWorker)
		}
		GinkgoWriter.Printf("jobs per worker: %v\n", perWorker)

		By("the manager's Kiln recorded each TTL deletion")
		evs := &corev1.EventList{}
		Expect(manager.List(ctx, evs, client.InNamespace(platform.DefaultNamespace))).To(Succeed())
		ttl := 0
		for _, e := range evs.Items {
			if e.Reason == "TTLExpired" && strings.HasPrefix(e.InvolvedObject.Name, prefix) {
				ttl++
			}
		}
		Expect(ttl).To(Equal(n - kept))

		By("deleting a kept job on the manager")
		for i := range kept {
			Expect(manager.Delete(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: platform.DefaultNamespace, Name: fmt.Sprintf("%s%02d", prefix, i)}})).To(Succeed())
		}
	})

	It("fails a job on the manager when its deadline fires on the worker", func(ctx context.Context) {
		tj := dispatched("mk-deadline-"+rand.String(4), 10*time.Minute).ActiveDeadlineSeconds(5).Obj()
		Expect(manager.Create(ctx, tj)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(manager.Delete(ctx, tj))).To(Succeed()) })
		Eventually(ctx, func(g Gomega) {
			got := &trainer.TrainJob{}
			g.Expect(manager.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobFailed)
			g.Expect(c).NotTo(BeNil(), "conditions %+v", got.Status.Conditions)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(trainer.TrainJobDeadlineExceededReason))
			g.Expect(got.Status.CompletionTime).NotTo(BeNil())
		}).Should(Succeed())
	})
})

var _ = Describe("Suspend, resume and delete on the manager", func() {
	It("reach the worker's copy", func(ctx context.Context) {
		tj := dispatched("mk-suspend-"+rand.String(4), 30*time.Second).Obj()
		Expect(manager.Create(ctx, tj)).To(Succeed())
		key := client.ObjectKeyFromObject(tj)
		var on string
		Eventually(ctx, func(g Gomega) {
			got := &trainer.TrainJob{}
			g.Expect(manager.Get(ctx, key, got)).To(Succeed())
			on = workerCluster(ctx, g, got)
			g.Expect(workers).To(HaveKey(on))
			g.Expect(workers[on].Get(ctx, key, &trainer.TrainJob{})).To(Succeed())
		}).Should(Succeed())

		By("suspended on the manager (kiln suspend: its Workload deactivated): the copy on " + on + " goes, the job waits suspended")
		_, errOut, code := kilnCLI("suspend", tj.Name)
		Expect(code).To(BeZero(), errOut)
		Eventually(ctx, func(g Gomega) {
			g.Expect(apierrors.IsNotFound(workers[on].Get(ctx, key, &trainer.TrainJob{}))).To(BeTrue(), "the copy on %s is still there", on)
			got := &trainer.TrainJob{}
			g.Expect(manager.Get(ctx, key, got)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobSuspended)).To(BeTrue(), "conditions %+v", got.Status.Conditions)
			g.Expect(got.Status.StartTime).To(BeNil())
		}).Should(Succeed())

		By("resumed: dispatched again, and completes")
		_, errOut, code = kilnCLI("resume", tj.Name)
		Expect(code).To(BeZero(), errOut)
		read := func(g Gomega) *trainer.TrainJob {
			got := &trainer.TrainJob{}
			g.Expect(manager.Get(ctx, key, got)).To(Succeed())
			return got
		}
		Eventually(ctx, func(g Gomega) {
			got := read(g)
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobComplete)).To(BeTrue(), "conditions %+v", got.Status.Conditions)
		}).Should(Succeed())

		By("deleted on the manager: gone everywhere")
		Expect(manager.Delete(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			for name, c := range workers {
				g.Expect(apierrors.IsNotFound(c.Get(ctx, key, &trainer.TrainJob{}))).To(BeTrue(), "still on %s", name)
			}
			g.Expect(apierrors.IsNotFound(manager.Get(ctx, key, &trainer.TrainJob{}))).To(BeTrue())
		}).Should(Succeed())
	})
})

var _ = Describe("A schedule on the manager", func() {
	It("has its runs dispatched to the workers", func(ctx context.Context) {
		run := dispatched("unused", 2*time.Second).Obj()
		cron := kilntesting.MakeCronTrainJob("mk-cron-"+rand.String(4), platform.DefaultNamespace).Schedule("* * * * *").Obj()
		cron.UID = ""
		cron.Spec.TrainJobTemplate = kiln.TrainJobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: run.Labels}, Spec: run.Spec}
		Expect(manager.Create(ctx, cron)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(manager.Delete(ctx, cron))).To(Succeed()) })
		By("its first run completes on a worker (it is due within the minute)")
		Eventually(ctx, func(g Gomega) {
			list := &trainer.TrainJobList{}
			g.Expect(manager.List(ctx, list, client.InNamespace(cron.Namespace))).To(Succeed())
			var done []string
			for i := range list.Items {
				tj := &list.Items[i]
				if !metav1.IsControlledBy(tj, cron) || !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
					continue
				}
				g.Expect(tj.Spec.ManagedBy).To(HaveValue(Equal(trainer.MultiKueueControllerName)))
				g.Expect(workers).To(HaveKey(workerCluster(ctx, g, tj)))
				done = append(done, tj.Name)
			}
			g.Expect(done).NotTo(BeEmpty(), "no run of %s completed", cron.Name)
		}).WithTimeout(4 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	})
})

var _ = Describe("A lost worker", Serial, func() {
	It("has its job dispatched again to another worker, where it completes", func(ctx context.Context) {
		tj := dispatched("mk-lost-"+rand.String(4), 40*time.Second).Obj()
		Expect(manager.Create(ctx, tj)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(manager.Delete(ctx, tj))).To(Succeed()) })

		By("running on a worker")
		var first string
		Eventually(ctx, func(g Gomega) {
			got := &trainer.TrainJob{}
			g.Expect(manager.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
			first = workerCluster(ctx, g, got)
			g.Expect(first).NotTo(BeEmpty())
			g.Expect(got.Status.JobsStatus).NotTo(BeEmpty())
			g.Expect(got.Status.JobsStatus[0].Active).To(HaveValue(BeNumerically(">", 0)), "the worker's pods run")
		}).Should(Succeed())

		By("losing " + first + ": its control plane stops")
		lost, err := plat.WorkerNamed(first)
		Expect(err).NotTo(HaveOccurred())
		w := &platform.Platform{Config: lost, Out: GinkgoWriter}
		Expect(w.StopControlPlane(ctx)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(w.StartControlPlane(ctx)).To(Succeed()) })

		By(fmt.Sprintf("after Kueue's worker-lost timeout (%s), dispatched again and completed elsewhere", platform.MultiKueueWorkerLostTimeout))
		Eventually(ctx, func(g Gomega) {
			got := &trainer.TrainJob{}
			g.Expect(manager.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobComplete)).To(BeTrue(), "conditions %+v", got.Status.Conditions)
			cluster := workerCluster(ctx, g, got)
			g.Expect(cluster).NotTo(Equal(first))
			g.Expect(workers).To(HaveKey(cluster))
		}).WithTimeout(4 * time.Minute).Should(Succeed())

		By("the manager's Kiln said the worker was lost")
		evs := &corev1.EventList{}
		Expect(manager.List(ctx, evs, client.InNamespace(platform.DefaultNamespace))).To(Succeed())
		var reasons []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == tj.Name {
				reasons = append(reasons, e.Reason)
			}
		}
		Expect(reasons).To(ContainElement("WorkerLost"))
	})
})

// kilnCLI runs bin/kiln against the manager's Kiln API server, as the platform's demo user.
func kilnCLI(args ...string) (stdout, stderr string, code int) {
	GinkgoHelper()
	return framework.CLI{Bin: plat.Bin("kiln"), Env: []string{"KILN_CONFIG=" + plat.ClientConfigFile()}}.Run("", args...)
}
