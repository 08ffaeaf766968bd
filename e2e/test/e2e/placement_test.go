package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/runtimes"
)

// boundPods counts the pods of a TrainJob the scheduler bound to a node.
func boundPods(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// Serial: it fills the KWOK fleet's GPUs.
var _ = Describe("Gang scheduling on the KWOK fleet", Serial, func() {
	It("binds no pod of a gang until every pod of it fits, then binds them all", func(ctx context.Context) {
		ns := newNamespace(ctx, "gang")
		crt, err := runtimes.ClusterTrainingRuntime("torch-distributed")
		Expect(err).NotTo(HaveOccurred())
		spec := crt.Spec.DeepCopy()
		spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{
			Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](10)},
		}}
		Expect(k8s.Create(ctx, &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "gang", Namespace: ns}, Spec: *spec})).To(Succeed())
		long := podPatch("node", map[string]string{platform.AnnotationSimDuration: "10m"})

		By("filling 3 of the 4 on-demand GPU nodes")
		filler := torchJob(ns, "filler", 3).ResourcesPerNode(gpusPerNode("8", "")).RuntimePatch(long).Obj()
		Expect(k8s.Create(ctx, filler)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(boundPods(podsOf(ctx, g, ns, "filler"))).To(Equal(3))
		}).WithTimeout(2 * time.Minute).Should(Succeed())

		By("submitting a 2-node gang: one node is free, so none of its pods may be bound")
		gang := torchJob(ns, "gang", 2).ResourcesPerNode(gpusPerNode("8", "")).RuntimePatch(long).Obj()
		gang.Spec.RuntimeRef = trainer.RuntimeRef{Name: "gang", Kind: ptr.To(trainer.TrainingRuntimeKind)}
		Expect(k8s.Create(ctx, gang)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			pg := &unstructured.Unstructured{}
			pg.SetAPIVersion("scheduling.x-k8s.io/v1alpha1")
			pg.SetKind("PodGroup")
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(gang), pg)).To(Succeed())
			g.Expect(pg.Object["spec"]).To(HaveKeyWithValue("minMember", int64(2)))
			g.Expect(podsOf(ctx, g, ns, "gang")).To(HaveLen(2))
		}).WithTimeout(time.Minute).Should(Succeed())
		// Longer than the PodGroup's 10 s schedule timeout: its pods are tried, held at
		// Permit, and released, never bound.
		Consistently(ctx, func(g Gomega) {
			g.Expect(boundPods(podsOf(ctx, g, ns, "gang"))).To(BeZero(), "a pod of the gang bound while its sibling cannot be")
		}).WithTimeout(25 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		By("freeing the fleet: the whole gang is bound")
		Expect(k8s.Delete(ctx, filler, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			pods := podsOf(ctx, g, ns, "gang")
			g.Expect(pods).To(HaveLen(2))
			g.Expect(boundPods(pods)).To(Equal(2))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(k8s.Delete(ctx, gang)).To(Succeed())
	})
})

// nodeLabels are the labels of the nodes the pods are bound to.
func nodeLabels(ctx context.Context, g Gomega, pods []corev1.Pod, label string) []string {
	var out []string
	for _, p := range pods {
		n := &corev1.Node{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n)).To(Succeed())
		out = append(out, n.Labels[label])
	}
	return out
}

var _ = Describe("Kueue topology-aware scheduling on the KWOK fleet", func() {
	It("places every pod of a rack-required job in one rack, and says why a job no rack holds waits", func(ctx context.Context) {
		ns := newNamespace(ctx, "tas")
		// A ClusterQueue of its own on the platform's TAS flavor: Kueue v0.19 remembers, per
		// ClusterQueue, the shape of a workload that did not fit (SchedulingEquivalenceHashing)
		// and skips an identical one without evaluating it, even in another namespace, until
		// the queue is retried.
		cq := kueueObject("ClusterQueue", "", ns)
		Expect(yamlInto(fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: %s}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: %s
      resources:
      - {name: cpu, nominalQuota: "512"}
      - {name: memory, nominalQuota: 4Ti}
      - {name: nvidia.com/gpu, nominalQuota: "128"}
`, ns, ns, platform.FlavorTAS), cq)).To(Succeed())
		Expect(k8s.Create(ctx, cq)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, cq))).To(Succeed()) })
		lq := kueueObject("LocalQueue", ns, "tas")
		Expect(unstructured.SetNestedField(lq.Object, ns, "spec", "clusterQueue")).To(Succeed())
		Expect(k8s.Create(ctx, lq)).To(Succeed())
		inOneRack := podPatch("node", map[string]string{
			"kueue.x-k8s.io/podset-required-topology": platform.LabelTopologyRack,
			platform.AnnotationSimDuration:            "10m",
		})

		By("a job of 4 nodes, a rack's worth")
		rack := torchJob(ns, "rack", 4).Label(labelQueue, "tas").ResourcesPerNode(gpusPerNode("8", "")).RuntimePatch(inOneRack).Obj()
		Expect(k8s.Create(ctx, rack)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			pods := podsOf(ctx, g, ns, "rack")
			g.Expect(pods).To(HaveLen(4))
			g.Expect(boundPods(pods)).To(Equal(4))
			racks := nodeLabels(ctx, g, pods, platform.LabelTopologyRack)
			g.Expect(racks).To(HaveEach(racks[0]), "every pod in one rack")
			g.Expect(racks[0]).NotTo(BeEmpty())
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		By("Kueue read the request from the job's pod template (Kiln renders the runtime patch)")
		wls := workloadsOf(ctx, Default, ns, getTrainJob(ctx, Default, ns, "rack").UID)
		Expect(wls).To(HaveLen(1))
		podSets, _, _ := unstructured.NestedSlice(wls[0].Object, "spec", "podSets")
		Expect(podSets).To(ContainElement(HaveKeyWithValue("topologyRequest", HaveKeyWithValue("required", platform.LabelTopologyRack))))

		By("a job of 5 nodes: within quota, but no rack has 5 nodes")
		tooBig := torchJob(ns, "too-big", 5).Label(labelQueue, "tas").ResourcesPerNode(gpusPerNode("8", "")).RuntimePatch(inOneRack).Obj()
		Expect(k8s.Create(ctx, tooBig)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			wls := workloadsOf(ctx, g, ns, getTrainJob(ctx, g, ns, "too-big").UID)
			g.Expect(wls).To(HaveLen(1))
			g.Expect(conditionStatus(&wls[0], "QuotaReserved")).To(Equal("False"))
			g.Expect(conditionMessage(&wls[0], "QuotaReserved")).To(
				// "allows to fit only 4 out of 5", or "doesn't allow to fit any of 5" while other racks are busy.
				MatchRegexp(`couldn't assign flavors to pod set node: topology "default" (allows to fit only \d+ out|doesn't allow to fit any) of 5 pod\(s\)`))
		}).WithTimeout(time.Minute).Should(Succeed())
		Expect(podsOf(ctx, Default, ns, "too-big")).To(BeEmpty(), "suspended until admitted")

	})
})
