package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/test/framework"
)

// seedTrainJob is the seed manifest, applied verbatim.
const seedTrainJob = `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: my-trainjob
  namespace: my-namespace
spec:
  activeDeadlineSeconds: 3600
  runtimeRef:
    name: torch-distributed
    kind: ClusterTrainingRuntime
    apiGroup: trainer.kubeflow.org
  trainer:
    image: docker.io/my-training-image:latest
    command:
      - torchrun
      - train.py
`

// kubectl runs the kubectl from bin/ (on PATH under make) against the cluster under test.
func kubectl(stdin string, args ...string) (string, error) {
	cmd := exec.Command("kubectl", args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func getTrainJob(ctx context.Context, g Gomega, ns, name string) *trainer.TrainJob {
	tj := &trainer.TrainJob{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj)).To(Succeed())
	return tj
}

// waitCondition waits, as long as the suite's default allows, for the TrainJob's condition.
func waitCondition(ctx context.Context, ns, name, t string, s metav1.ConditionStatus, reason string) *trainer.TrainJob {
	GinkgoHelper()
	return framework.WaitForCondition(ctx, k8s, client.ObjectKey{Namespace: ns, Name: name}, t, s, reason)
}

// torchJob builds a TrainJob of nodes torchrun nodes on the catalog's torch-distributed.
func torchJob(ns, name string, nodes int32) *kilntesting.TrainJobWrapper {
	return kilntesting.MakeTrainJob(name, ns).NumNodes(nodes).Command("torchrun", "train.py")
}

// gpusPerNode asks for n GPUs per node (requests and limits), and cpu CPUs when not empty.
func gpusPerNode(n, cpu string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{gpu: mustQuantity(n)}, Limits: corev1.ResourceList{gpu: mustQuantity(n)},
	}
	if cpu != "" {
		r.Requests[corev1.ResourceCPU] = mustQuantity(cpu)
	}
	return r
}

// podPatch annotates the pods of a replicated job through a runtime patch, which is how
// a test tells the simulated pods how long to run or how to fail.
func podPatch(job string, annotations map[string]string) trainer.RuntimePatch {
	return platform.SimulatedPods("e2e.kiln.dev/simulation", job, annotations)
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			out[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		} else {
			out[e.Name] = e.Value
		}
	}
	return out
}

var _ = Describe("TrainJobs", func() {
	It("runs the seed manifest, applied verbatim, to Complete", Label(chartMode), func(ctx context.Context) {
		_, _ = kubectl("", "create", "namespace", "my-namespace")
		DeferCleanup(func() { _, _ = kubectl("", "delete", "namespace", "my-namespace", "--wait=false") })
		_, _ = kubectl("", "delete", "trainjob", "my-trainjob", "-n", "my-namespace", "--ignore-not-found", "--wait=true")
		out, err := kubectl(seedTrainJob, "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		tj := waitCondition(ctx, "my-namespace", "my-trainjob", trainer.TrainJobComplete, metav1.ConditionTrue, "")
		Expect(tj.Status.JobsStatus).To(ConsistOf(And(HaveField("Name", "node"), HaveField("Succeeded", HaveValue(BeEquivalentTo(1))))))
		out, err = kubectl("", "get", "trainjob", "my-trainjob", "-n", "my-namespace", "--no-headers")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Fields(out)).To(HaveExactElements("my-trainjob", "Complete", HaveSuffix("s")), "the State column")
		events := &corev1.EventList{}
		Expect(k8s.List(ctx, events, client.InNamespace("my-namespace"))).To(Succeed())
		var reasons []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == trainer.TrainJobKind {
				reasons = append(reasons, e.Reason)
			}
		}
		Expect(reasons).To(ContainElements("Created", "Completed"))
	})

	It("wires every torch node with its rank and the master's address", func(ctx context.Context) {
		ns := newNamespace(ctx, "torch")
		tj := torchJob(ns, "multi", 3).RuntimePatch(podPatch("node", map[string]string{annDuration: "4s"})).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(3))
			var indexes []string
			for _, p := range pods.Items {
				env := envOf(p.Spec.Containers[0])
				g.Expect(env).To(HaveKeyWithValue("PET_NNODES", "3"))
				g.Expect(env).To(HaveKeyWithValue("PET_MASTER_ADDR", "multi-node-0-0.multi"))
				g.Expect(env).To(HaveKeyWithValue("PET_MASTER_PORT", "29500"))
				g.Expect(env).To(HaveKeyWithValue("PET_NODE_RANK", "fieldRef:metadata.annotations['batch.kubernetes.io/job-completion-index']"))
				g.Expect(p.Spec.Hostname).To(HavePrefix("multi-node-0-"))
				g.Expect(p.Spec.Subdomain).To(Equal("multi"))
				indexes = append(indexes, p.Annotations["batch.kubernetes.io/job-completion-index"])
			}
			g.Expect(indexes).To(ConsistOf("0", "1", "2"))
		}).Should(Succeed())
		waitCondition(ctx, ns, "multi", trainer.TrainJobComplete, metav1.ConditionTrue, "")
	})

	It("runs an MPI job with its SSH keys and hostfile", func(ctx context.Context) {
		ns := newNamespace(ctx, "mpi")
		tj := kilntesting.MakeTrainJob("mpi", ns).NumNodes(3).Command("mpirun", "python", "train.py").
			// The workers serve sshd until the launcher is done.
			RuntimePatch(podPatch("node", map[string]string{annDuration: "60s"})).Obj()
		tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: "mpi-distributed"}
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			secret := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-mpi-ssh-auth"}, secret)).To(Succeed())
			g.Expect(secret.Type).To(Equal(corev1.SecretTypeSSHAuth))
			cm := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mpi-mpi-hostfile"}, cm)).To(Succeed())
			g.Expect(cm.Data["hostfile"]).To(Equal("mpi-node-0-0.mpi slots=1\nmpi-node-0-1.mpi slots=1\nmpi-launcher-0-0.mpi slots=1\n"))
		}).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/replicatedjob-name": "launcher"})).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			env := envOf(pods.Items[0].Spec.Containers[0])
			g.Expect(env).To(HaveKeyWithValue("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"))
			g.Expect(pods.Items[0].Spec.Containers[0].Command).To(Equal([]string{"mpirun", "python", "train.py"}))
		}).Should(Succeed())
		waitCondition(ctx, ns, "mpi", trainer.TrainJobComplete, metav1.ConditionTrue, "")
	})

	It("reports the JobSet's failure when a training pod fails", func(ctx context.Context) {
		ns := newNamespace(ctx, "fail")
		// A runtime whose Jobs do not retry, so the failure surfaces at once.
		rt := &trainer.TrainingRuntime{}
		ctr := &trainer.ClusterTrainingRuntime{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "torch-distributed"}, ctr)).To(Succeed())
		rt.Name, rt.Namespace, rt.Spec = "torch-no-retry", ns, *ctr.Spec.DeepCopy()
		rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = ptr.To[int32](0)
		Expect(k8s.Create(ctx, rt)).To(Succeed())
		tj := torchJob(ns, "crash", 2).RuntimePatch(podPatch("node", map[string]string{annExitCode: "42", annDuration: "1s"})).Obj()
		tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: rt.Name, Kind: ptr.To(trainer.TrainingRuntimeKind)}
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		got := waitCondition(ctx, ns, "crash", trainer.TrainJobFailed, metav1.ConditionTrue, "")
		c := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobFailed)
		Expect(c.Reason).To(Equal("FailedJobs"))
		Expect(c.Message).To(ContainSubstring("failed"))
		By("never recreating the JobSet of a failed TrainJob")
		js := &unstructured.Unstructured{}
		js.SetAPIVersion("jobset.x-k8s.io/v1alpha2")
		js.SetKind("JobSet")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "crash"}, js)).To(Succeed())
		Expect(k8s.Delete(ctx, js)).To(Succeed())
		Consistently(ctx, func() bool {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "crash"}, js)
			return apierrors.IsNotFound(err)
		}, 3*time.Second).Should(BeTrue())
		Expect(framework.HasCondition(getTrainJob(ctx, Default, ns, "crash"), trainer.TrainJobFailed, metav1.ConditionTrue, "FailedJobs")).To(BeTrue())
	})

	It("suspends and resumes", func(ctx context.Context) {
		ns := newNamespace(ctx, "suspend")
		tj := torchJob(ns, "pausable", 2).Suspend(true).RuntimePatch(podPatch("node", map[string]string{annDuration: "6s"})).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		waitCondition(ctx, ns, "pausable", trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)
		Consistently(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}, 2*time.Second).Should(Succeed())
		out, err := kubectl("", "get", "trainjob", "pausable", "-n", ns, "--no-headers")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("Suspended"))

		By("resuming with the documented kubectl patch")
		out, err = kubectl("", "patch", "trainjob", "pausable", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":false}}`)
		Expect(err).NotTo(HaveOccurred(), out)
		waitCondition(ctx, ns, "pausable", trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason)
		Eventually(ctx, func(g Gomega) {
			g.Expect(getTrainJob(ctx, g, ns, "pausable").Status.JobsStatus).To(ConsistOf(HaveField("Active", HaveValue(BeEquivalentTo(1)))))
			out, err := kubectl("", "get", "trainjob", "pausable", "-n", ns, "--no-headers")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).NotTo(ContainSubstring("Suspended"), "a resumed job must not print Suspended")
		}).Should(Succeed())

		By("suspending a running job: its pods go and active drops to 0")
		patch := client.MergeFrom(getTrainJob(ctx, Default, ns, "pausable"))
		running := getTrainJob(ctx, Default, ns, "pausable")
		running.Spec.Suspend = ptr.To(true)
		Expect(k8s.Patch(ctx, running, patch)).To(Succeed())
		start := time.Now()
		Eventually(ctx, func(g Gomega) {
			st := getTrainJob(ctx, g, ns, "pausable").Status
			g.Expect(st.JobsStatus).To(ConsistOf(HaveField("Active", HaveValue(BeEquivalentTo(0)))))
		}).WithTimeout(15 * time.Second).Should(Succeed())
		GinkgoWriter.Printf("jobsStatus[].active reached 0 %s after the suspend\n", time.Since(start).Round(time.Millisecond))
		waitCondition(ctx, ns, "pausable", trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)

		By("resuming it again to completion")
		patch = client.MergeFrom(getTrainJob(ctx, Default, ns, "pausable"))
		resumed := getTrainJob(ctx, Default, ns, "pausable")
		resumed.Spec.Suspend = ptr.To(false)
		Expect(k8s.Patch(ctx, resumed, patch)).To(Succeed())
		waitCondition(ctx, ns, "pausable", trainer.TrainJobComplete, metav1.ConditionTrue, "")
	})

	It("runs a Kueue-queued TrainJob on the flavor Kueue chose", Label(chartMode), func(ctx context.Context) {
		ns := newNamespace(ctx, "queued")
		lq := kueueObject("LocalQueue", ns, "default")
		Expect(unstructured.SetNestedField(lq.Object, "cluster-queue", "spec", "clusterQueue")).To(Succeed())
		Expect(k8s.Create(ctx, lq)).To(Succeed())
		tj := torchJob(ns, "queued", 2).Label(labelQueue, "default").ResourcesPerNode(gpusPerNode("8", "4")).
			// Kueue writes the TrainJob with upstream's Go types, which lack this field.
			TTLSecondsAfterFinished(3).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		// Kueue's webhook appends its runtime patch at creation, after Kiln's defaulter ran;
		// the defaulter is invoked again and gives it its time, as upstream does.
		Expect(tj.Spec.RuntimePatches).To(ContainElement(And(
			HaveField("Manager", trainer.KueueManager),
			HaveField("Time", Not(BeNil())),
		)), "Kueue's runtime patch, with its time")
		done := waitCondition(ctx, ns, "queued", trainer.TrainJobComplete, metav1.ConditionTrue, "")
		Expect(done.Spec.RuntimePatches).To(ContainElement(HaveField("Manager", trainer.KueueManager)), "Kueue admitted it")
		Expect(done.Spec.TTLSecondsAfterFinished).To(HaveValue(BeEquivalentTo(3)), "the TTL survived Kueue's writes")
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			Expect(p.Spec.NodeSelector).To(HaveKey("kiln.dev/node-pool"), fmt.Sprintf("pod %s carries Kueue's flavor", p.Name))
		}
		Eventually(ctx, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tj), &trainer.TrainJob{}))
		}).Should(BeTrue(), "the TTL is honoured")
	})
})
