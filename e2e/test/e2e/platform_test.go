package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// Annotations the local platform's KWOK stages understand.
const (
	annDuration   = platform.AnnotationSimDuration
	annExitCode   = platform.AnnotationSimExitCode
	annEvictAfter = platform.AnnotationSimEvictAfter
	labelQueue    = "kueue.x-k8s.io/queue-name"
	gpu           = corev1.ResourceName("nvidia.com/gpu")
)

func gpuJob(ns, name string, gpus int64, annotations map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:  "trainer",
						Image: "example.com/trainer:latest",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), gpu: *resource.NewQuantity(gpus, resource.DecimalSI)},
							Limits:   corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)},
						},
					}},
				},
			},
		},
	}
}

func jobCondition(ctx context.Context, job *batchv1.Job, t batchv1.JobConditionType) func(Gomega) {
	return func(g Gomega) {
		got := &batchv1.Job{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), got)).To(Succeed())
		g.Expect(got.Status.Conditions).To(ContainElement(And(
			HaveField("Type", t), HaveField("Status", corev1.ConditionTrue))))
	}
}

func jobPods(ctx context.Context, job *batchv1.Job) []corev1.Pod {
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{"job-name": job.Name})).To(Succeed())
	return pods.Items
}

var _ = Describe("The local platform", func() {
	It("has GPU nodes and tainted spot nodes with their capacity", func(ctx context.Context) {
		nodes := &corev1.NodeList{}
		Expect(k8s.List(ctx, nodes)).To(Succeed())
		var gpuNodes, spotNodes int
		for _, n := range nodes.Items {
			if n.Labels["kiln.dev/node-pool"] == "real" {
				continue // the real node has this machine's CPUs, and no GPU
			}
			Expect(n.Labels).To(HaveKeyWithValue("nvidia.com/gpu.present", "true"))
			Expect(n.Labels).To(HaveKey("nvidia.com/gpu.product"))
			Expect(n.Labels).To(HaveKey("nvidia.com/gpu.count"))
			q := n.Status.Allocatable[gpu]
			Expect(q.Value()).To(BeNumerically(">", 0), "node %s advertises no GPUs", n.Name)
			if n.Labels["cloud.google.com/gke-spot"] == "true" {
				spotNodes++
				Expect(n.Spec.Taints).To(ContainElement(HaveField("Key", "cloud.google.com/gke-spot")))
			} else {
				gpuNodes++
			}
		}
		Expect(gpuNodes).To(BeNumerically(">=", 1))
		Expect(spotNodes).To(BeNumerically(">=", 1))
	})

	It("runs a Job to Complete on a GPU node", func(ctx context.Context) {
		ns := newNamespace(ctx, "job")
		job := gpuJob(ns, "train", 8, nil)
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Eventually(ctx, jobCondition(ctx, job, batchv1.JobComplete)).Should(Succeed())
		pods := jobPods(ctx, job)
		Expect(pods).To(HaveLen(1))
		Expect(pods[0].Spec.NodeName).To(HavePrefix("kwok-gpu-"))
		Expect(pods[0].Status.Phase).To(Equal(corev1.PodSucceeded))
	})

	It("keeps a pod that asks for more GPUs than any node has Pending", func(ctx context.Context) {
		ns := newNamespace(ctx, "toobig")
		nodes := &corev1.NodeList{}
		Expect(k8s.List(ctx, nodes)).To(Succeed())
		var most int64
		for _, n := range nodes.Items {
			q := n.Status.Allocatable[gpu]
			most = max(most, q.Value())
		}
		job := gpuJob(ns, "too-big", most+1, nil)
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			pods := jobPods(ctx, job)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodScheduled), HaveField("Status", corev1.ConditionFalse),
				HaveField("Reason", corev1.PodReasonUnschedulable))))
		}).Should(Succeed())
		Consistently(ctx, func(g Gomega) {
			pods := jobPods(ctx, job)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(pods[0].Spec.NodeName).To(BeEmpty())
		}, 3*time.Second).Should(Succeed())
	})

	It("fails a Job whose pod is annotated to exit non-zero", func(ctx context.Context) {
		ns := newNamespace(ctx, "crash")
		job := gpuJob(ns, "crash", 1, map[string]string{annExitCode: "3", annDuration: "1s"})
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Eventually(ctx, jobCondition(ctx, job, batchv1.JobFailed)).Should(Succeed())
		pods := jobPods(ctx, job)
		Expect(pods).To(HaveLen(1))
		Expect(pods[0].Status.Phase).To(Equal(corev1.PodFailed))
		Expect(pods[0].Status.ContainerStatuses).To(ConsistOf(HaveField("State.Terminated.ExitCode", int32(3))))
	})

	It("evicts a pod on a spot node like a spot reclaim", func(ctx context.Context) {
		ns := newNamespace(ctx, "spot")
		job := gpuJob(ns, "spot", 1, map[string]string{annEvictAfter: "1s"})
		job.Spec.Template.Spec.NodeSelector = map[string]string{"cloud.google.com/gke-spot": "true"}
		job.Spec.Template.Spec.Tolerations = []corev1.Toleration{{
			Key: "cloud.google.com/gke-spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}}
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			pods := jobPods(ctx, job)
			g.Expect(pods).NotTo(BeEmpty())
			p := pods[0]
			g.Expect(p.Spec.NodeName).To(HavePrefix("kwok-spot-"))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("Evicted"))
			g.Expect(p.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.DisruptionTarget), HaveField("Status", corev1.ConditionTrue))))
		}).Should(Succeed())
	})

	It("serves pod logs through KWOK", func(ctx context.Context) {
		ns := newNamespace(ctx, "logs")
		job := gpuJob(ns, "logs", 1, map[string]string{annDuration: "30s"})
		Expect(k8s.Create(ctx, job)).To(Succeed())
		var pod string
		Eventually(ctx, func(g Gomega) {
			pods := jobPods(ctx, job)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodRunning))
			pod = pods[0].Name
		}).Should(Succeed())
		stream, err := clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).Stream(ctx)
		Expect(err).NotTo(HaveOccurred())
		defer stream.Close()
		logs, err := io.ReadAll(stream)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(logs)).To(ContainSubstring("training complete"))
	})

	It("runs a JobSet to Completed with the JobSet controller", func(ctx context.Context) {
		ns := newNamespace(ctx, "jobset")
		js := &unstructured.Unstructured{}
		Expect(yamlInto(fmt.Sprintf(`
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: pair, namespace: %s}
spec:
  replicatedJobs:
  - name: node
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: node
              image: example.com/trainer:latest
              resources:
                requests: {cpu: "1", nvidia.com/gpu: "4"}
                limits: {nvidia.com/gpu: "4"}
`, ns), js)).To(Succeed())
		Expect(k8s.Create(ctx, js)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(js.GroupVersionKind())
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(js), got)).To(Succeed())
			g.Expect(conditionStatus(got, "Completed")).To(Equal("True"))
		}).Should(Succeed())
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		Expect(pods.Items).To(HaveLen(4))
	})

	It("has the default Kueue queues, active", func(ctx context.Context) {
		for _, obj := range []struct{ kind, ns, name string }{
			{"ResourceFlavor", "", "gpu"}, {"ResourceFlavor", "", "gpu-spot"},
			{"ClusterQueue", "", "cluster-queue"}, {"LocalQueue", "default", "default"},
		} {
			u := kueueObject(obj.kind, obj.ns, obj.name)
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed(), "%s %s", obj.kind, obj.name)
			if obj.kind == "ClusterQueue" || obj.kind == "LocalQueue" {
				Eventually(ctx, func(g Gomega) {
					g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
					g.Expect(conditionStatus(u, "Active")).To(Equal("True"))
				}).Should(Succeed())
			}
		}
	})

	It("queues a Kueue Job while the quota is used and admits it when the quota frees", func(ctx context.Context) {
		ns := newNamespace(ctx, "kueue")
		smallQueue(ctx, ns)

		first := gpuJob(ns, "first", 8, map[string]string{annDuration: "8s"})
		second := gpuJob(ns, "second", 8, nil)
		for _, j := range []*batchv1.Job{first, second} {
			j.Labels = map[string]string{labelQueue: "queue"}
			j.Spec.Suspend = ptr.To(true)
		}
		Expect(k8s.Create(ctx, first)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.Spec.Suspend).To(HaveValue(BeFalse()))
		}).Should(Succeed())
		Expect(k8s.Create(ctx, second)).To(Succeed())

		By("keeping the second Job suspended while the first holds the quota")
		Consistently(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(second), second)).To(Succeed())
			g.Expect(second.Spec.Suspend).To(HaveValue(BeTrue()))
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.Status.Succeeded).To(BeZero())
		}, 3*time.Second).Should(Succeed())

		By("admitting the second Job once the first completes")
		Eventually(ctx, jobCondition(ctx, first, batchv1.JobComplete)).Should(Succeed())
		Eventually(ctx, jobCondition(ctx, second, batchv1.JobComplete)).Should(Succeed())
	})

	It("listens on 127.0.0.1 and the real node's address only", func() {
		listeners, err := strayListeners()
		Expect(err).NotTo(HaveOccurred())
		Expect(listeners).To(BeEmpty(), "platform processes listening beyond 127.0.0.1 and the real node's address:\n%s", strings.Join(listeners, "\n"))
	})
})

func kueueObject(kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// workloadsOf are the Kueue Workloads of the job with this UID.
func workloadsOf(ctx context.Context, g Gomega, ns string, uid types.UID) []unstructured.Unstructured {
	wls := &unstructured.UnstructuredList{}
	wls.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	wls.SetKind("WorkloadList")
	g.Expect(k8s.List(ctx, wls, client.InNamespace(ns), client.MatchingLabels{"kueue.x-k8s.io/job-uid": string(uid)})).To(Succeed())
	return wls.Items
}

func conditionStatus(u *unstructured.Unstructured, condType string) string {
	return conditionField(u, condType, "status")
}

func conditionMessage(u *unstructured.Unstructured, condType string) string {
	return conditionField(u, condType, "message")
}

func conditionField(u *unstructured.Unstructured, condType, field string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == condType {
			s, _ := m[field].(string)
			return s
		}
	}
	return ""
}
