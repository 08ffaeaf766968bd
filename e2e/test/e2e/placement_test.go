package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
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
		gangRuntime(ctx, ns)
		long := podPatch("node", map[string]string{platform.AnnotationSimDuration: "10m"})

		By("filling 3 of the 4 on-demand GPU nodes")
		filler := torchJob(ns, "filler", 3).ResourcesPerNode(gpusPerNode("8", "")).RuntimePatch(long).Obj()
		Expect(k8s.Create(ctx, filler)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			g.Expect(boundPods(podsOf(ctx, g, ns, "filler"))).To(Equal(3))
		}).WithTimeout(2 * time.Minute).Should(Succeed())

		By("submitting a 2-node gang: one node is free, so none of its pods may be bound")
		gang := gangJob(ns, "gang", 2).ResourcesPerNode(gpusPerNode("8", "")).RuntimePatch(long).Obj()
		Expect(k8s.Create(ctx, gang)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			pg := &unstructured.Unstructured{}
			pg.SetAPIVersion("scheduling.x-k8s.io/v1alpha1")
			pg.SetKind("PodGroup")
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(gang), pg)).To(Succeed())
			g.Expect(pg.Object["spec"]).To(HaveKeyWithValue("minMember", int64(2)))
			g.Expect(podsOf(ctx, g, ns, "gang")).To(HaveLen(2))
		}).WithTimeout(time.Minute).Should(Succeed())
		// Longer than the PodGroup's 10 s schedule timeout: none of its pods is bound while
		// the whole gang does not fit.
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

	It("holds a 16-pod gang whole on a fleet 90% full of small jobs, even one GPU short, then binds all of it; slow: 29 jobs fill the fleet, then two 20 s windows prove nothing binds early", func(ctx context.Context) {
		ns := newNamespace(ctx, "gang-fleet")
		gangRuntime(ctx, ns)
		long := podPatch("node", map[string]string{platform.AnnotationSimDuration: "10m"})
		const small = 29 // of the on-demand pool's 4 × 8 GPUs: 90%

		By("filling 29 of the on-demand pool's 32 GPUs with one-GPU jobs")
		for i := range small {
			Expect(k8s.Create(ctx, torchJob(ns, fmt.Sprintf("small-%02d", i), 1).ResourcesPerNode(gpusPerNode("1", "")).RuntimePatch(long).Obj())).To(Succeed())
		}
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(boundPods(pods.Items)).To(Equal(small))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

		By("a gang of 16 one-GPU pods, with 3 GPUs free: none of its pods is bound")
		Expect(k8s.Create(ctx, gangJob(ns, "gang", 16).ResourcesPerNode(gpusPerNode("1", "")).RuntimePatch(long).Obj())).To(Succeed())
		Eventually(ctx, func(g Gomega) { g.Expect(podsOf(ctx, g, ns, "gang")).To(HaveLen(16)) }).WithTimeout(time.Minute).Should(Succeed())
		noneBound := func(g Gomega) {
			g.Expect(boundPods(podsOf(ctx, g, ns, "gang"))).To(BeZero(), "a pod of the gang bound while the whole gang cannot be")
		}
		Consistently(ctx, noneBound).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		By("12 small jobs finish: 15 GPUs free, one short of the gang: still none bound")
		for i := range 12 {
			Expect(k8s.Delete(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("small-%02d", i)}},
				client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		}
		// Longer than the PodGroup's 10 s schedule timeout, after the last of their pods is gone.
		// The scheduler says why: the gang does not fit on the nodes its pods can use (the
		// spot and reserved pools' free GPUs are not theirs).
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(boundPods(pods.Items)).To(Equal(small - 12))
			noneBound(g)
			g.Expect(schedulingMessages(podsOf(ctx, g, ns, "gang"))).To(HaveEach(ContainSubstring("does not fit on the")))
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		Consistently(ctx, noneBound).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		By("one more finishes: the whole gang is bound, with the 16 small jobs left untouched")
		Expect(k8s.Delete(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "small-12"}})).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			pods := podsOf(ctx, g, ns, "gang")
			g.Expect(boundPods(pods)).To(Equal(16), "the scheduler says: %q", schedulingMessages(pods))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		for i := 13; i < small; i++ {
			Expect(boundPods(podsOf(ctx, Default, ns, fmt.Sprintf("small-%02d", i)))).To(Equal(1))
		}
	})

	It("preempts whole gangs for a higher-priority gang, never single pods of them; slow: four gangs fill the queue before the preemption, whose pods end with their grace period", func(ctx context.Context) {
		ns := newNamespace(ctx, "gang-preempt")
		gangRuntime(ctx, ns)
		long := podPatch("node", map[string]string{platform.AnnotationSimDuration: "10m"})
		// A ClusterQueue of its own over the on-demand pool's 32 GPUs, preempting lower priorities.
		namespaceQueue(ctx, ns, "gangs", platform.FlavorGPU, 32)
		for name, value := range map[string]int64{ns + "-low": 100, ns + "-high": 1000} {
			pc := kueueObject("WorkloadPriorityClass", "", name)
			pc.Object["value"] = value
			Expect(k8s.Create(ctx, pc)).To(Succeed())
			DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, pc))).To(Succeed()) })
		}

		By("4 low-priority gangs of 2 pods × 4 GPUs take the queue's 32 GPUs")
		lows := []string{"low-0", "low-1", "low-2", "low-3"}
		for _, name := range lows {
			Expect(k8s.Create(ctx, gangJob(ns, name, 2).Label(labelQueue, "gangs").Label(trainer.KueuePriorityClassLabel, ns+"-low").
				ResourcesPerNode(gpusPerNode("4", "")).RuntimePatch(long).Obj())).To(Succeed())
		}
		uids := map[string][]string{}
		Eventually(ctx, func(g Gomega) {
			for _, name := range lows {
				pods := podsOf(ctx, g, ns, name)
				g.Expect(boundPods(pods)).To(Equal(2), name)
				uids[name] = podUIDs(pods)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

		By("a high-priority gang of 4 pods × 4 GPUs: Kueue evicts two whole gangs for it")
		Expect(k8s.Create(ctx, gangJob(ns, "high", 4).Label(labelQueue, "gangs").Label(trainer.KueuePriorityClassLabel, ns+"-high").
			ResourcesPerNode(gpusPerNode("4", "")).RuntimePatch(long).Obj())).To(Succeed())
		var evicted, kept []string
		Eventually(ctx, func(g Gomega) {
			g.Expect(boundPods(podsOf(ctx, g, ns, "high"))).To(Equal(4))
			evicted, kept = nil, nil
			for _, name := range lows {
				wls := workloadsOf(ctx, g, ns, getTrainJob(ctx, g, ns, name).UID)
				g.Expect(wls).To(HaveLen(1))
				if conditionStatus(&wls[0], "Evicted") == "True" {
					g.Expect(conditionField(&wls[0], "Evicted", "reason")).To(Equal("Preempted"))
					g.Expect(podsOf(ctx, g, ns, name)).To(BeEmpty(), "%s: an evicted gang keeps no pod", name)
					evicted = append(evicted, name)
				} else {
					kept = append(kept, name)
				}
			}
			g.Expect(evicted).To(HaveLen(2), "two gangs free the 16 GPUs the high one needs")
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		for _, name := range kept {
			pods := podsOf(ctx, Default, ns, name)
			Expect(boundPods(pods)).To(Equal(2), "%s kept both its pods", name)
			Expect(podUIDs(pods)).To(Equal(uids[name]), "%s: no pod of a kept gang was evicted or replaced", name)
		}
		if os.Getenv("KILN_CONFIG") != "" {
			letCLIUserIn(ctx, ns)
			out, errOut, code := kilnCLI("", "describe", evicted[0], "-n", ns)
			Expect(code).To(Equal(0), errOut)
			Expect(out).To(MatchRegexp(`State:\s+Queued \(Preempted\)`))
		}
	})
})

// schedulingMessages are the distinct messages of the pods' PodScheduled conditions that are
// not True: why the scheduler has not bound them.
func schedulingMessages(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && !slices.Contains(out, c.Message) {
				out = append(out, c.Message)
			}
		}
	}
	return out
}

// gangRuntime creates the TrainingRuntime "gang" in ns: torch-distributed, gang-scheduled
// by the coscheduling plugin with a 10 s schedule timeout.
func gangRuntime(ctx context.Context, ns string) {
	GinkgoHelper()
	crt, err := runtimes.ClusterTrainingRuntime("torch-distributed")
	Expect(err).NotTo(HaveOccurred())
	spec := crt.Spec.DeepCopy()
	spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{
		Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](10)},
	}}
	Expect(k8s.Create(ctx, &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "gang", Namespace: ns}, Spec: *spec})).To(Succeed())
}

// gangJob is a torch job of nodes pods on the namespace's runtime "gang".
func gangJob(ns, name string, nodes int32) *kilntesting.TrainJobWrapper {
	return torchJob(ns, name, nodes).RuntimeRef(trainer.TrainingRuntimeKind, "gang")
}

// podUIDs are the pods' UIDs, sorted.
func podUIDs(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, string(p.UID))
	}
	slices.Sort(out)
	return out
}

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

// boundInOneRack waits until all n pods of job are bound to nodes of one rack, and
// returns that rack.
func boundInOneRack(ctx context.Context, ns, job string, n int) string {
	var rack string
	Eventually(ctx, func(g Gomega) {
		pods := podsOf(ctx, g, ns, job)
		g.Expect(pods).To(HaveLen(n))
		g.Expect(boundPods(pods)).To(Equal(n))
		racks := nodeLabels(ctx, g, pods, platform.LabelTopologyRack)
		g.Expect(racks).To(HaveEach(racks[0]), "every pod in one rack")
		g.Expect(racks[0]).NotTo(BeEmpty())
		rack = racks[0]
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return rack
}

var _ = Describe("Kueue topology-aware scheduling on the KWOK fleet", func() {
	It("places every pod of a rack-required job in one rack, and says why a job no rack holds waits", func(ctx context.Context) {
		ns := newNamespace(ctx, "tas")
		// A ClusterQueue of its own on the platform's TAS flavor: Kueue v0.19 remembers, per
		// ClusterQueue, the shape of a workload that did not fit (SchedulingEquivalenceHashing)
		// and skips an identical one without evaluating it, even in another namespace, until
		// the queue is retried.
		namespaceQueue(ctx, ns, "tas", platform.FlavorTAS, 128)
		inOneRack := podPatch("node", map[string]string{
			"kueue.x-k8s.io/podset-required-topology": platform.LabelTopologyRack,
			platform.AnnotationSimDuration:            "10m",
		})

		By("a job of 4 nodes, a rack's worth")
		rack := torchJob(ns, "rack", 4).Label(labelQueue, "tas").ResourcesPerNode(gpusPerNode("8", "")).RuntimePatch(inOneRack).Obj()
		Expect(k8s.Create(ctx, rack)).To(Succeed())
		rackOf := boundInOneRack(ctx, ns, "rack", 4)
		By("Kueue read the request from the job's pod template (Kiln renders the runtime patch)")
		wls := workloadsOf(ctx, Default, ns, getTrainJob(ctx, Default, ns, "rack").UID)
		Expect(wls).To(HaveLen(1))
		podSets, _, _ := unstructured.NestedSlice(wls[0].Object, "spec", "podSets")
		Expect(podSets).To(ContainElement(HaveKeyWithValue("topologyRequest", HaveKeyWithValue("required", platform.LabelTopologyRack))))

		By("kiln describe says which rack: Kueue's assignment of hostnames, with their nodes' block and rack")
		letCLIUserIn(ctx, ns)
		pods := podsOf(ctx, Default, ns, "rack")
		blockOf := nodeLabels(ctx, Default, pods, platform.LabelTopologyBlock)[0]
		out, errOut, code := kilnCLI("", "describe", "rack", "-n", ns)
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(ContainSubstring("Topology:       all training nodes in one rack (%s), required", platform.LabelTopologyRack))
		Expect(out).To(ContainSubstring("Placement:      node: 4 pods in block %s, rack %s (Topology %s, flavor %s, one rack required)",
			blockOf, rackOf, platform.TopologyName, platform.FlavorTAS))
		for _, p := range pods {
			Expect(out).To(MatchRegexp(`\n  node\s+%s\s+%s\s+%s\s+1\n`, blockOf, rackOf, p.Spec.NodeName), "a row per node of the placement")
		}

		By("a job of 5 nodes submitted with kiln submit --topology rack: within quota, but no rack has 5 nodes")
		out, errOut, code = kilnCLI("", "submit", "-n", ns, "--name", "too-big", "--runtime", "torch-distributed", "--nodes", "5",
			"--gpus-per-node", "8", "--queue", "tas", "--topology", "rack", "--", "torchrun", "train.py")
		Expect(code).To(Equal(0), out+errOut)
		Eventually(ctx, func(g Gomega) {
			wls := workloadsOf(ctx, g, ns, getTrainJob(ctx, g, ns, "too-big").UID)
			g.Expect(wls).To(HaveLen(1))
			g.Expect(conditionStatus(&wls[0], "QuotaReserved")).To(Equal("False"))
			g.Expect(conditionMessage(&wls[0], "QuotaReserved")).To(
				// "allows to fit only 4 out of 5", or "doesn't allow to fit any of 5" while other racks are busy.
				MatchRegexp(`couldn't assign flavors to pod set node: topology "default" (allows to fit only \d+ out|doesn't allow to fit any) of 5 pod\(s\)`))
		}).WithTimeout(time.Minute).Should(Succeed())
		Expect(podsOf(ctx, Default, ns, "too-big")).To(BeEmpty(), "suspended until admitted")
		wls = workloadsOf(ctx, Default, ns, getTrainJob(ctx, Default, ns, "too-big").UID)
		podSets, _, _ = unstructured.NestedSlice(wls[0].Object, "spec", "podSets")
		Expect(podSets).To(ContainElement(HaveKeyWithValue("topologyRequest", HaveKeyWithValue("required", platform.LabelTopologyRack))),
			"the API server resolved rack to the Topology's node label")
		out, errOut, code = kilnCLI("", "describe", "too-big", "-n", ns)
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(MatchRegexp(`Message:\s+no rack has room for all 5 pods of node \(it requires one rack, node label %s\); Kueue: couldn't assign flavors`, regexp.QuoteMeta(platform.LabelTopologyRack)))

		By("the catalog's torch-distributed-rack prefers one rack without being asked: another rack's 4 nodes")
		byRuntime := torchJob(ns, "by-runtime", 4).RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed-rack").Label(labelQueue, "tas").
			ResourcesPerNode(gpusPerNode("8", "")).RuntimePatch(podPatch("node", map[string]string{platform.AnnotationSimDuration: "10m"})).Obj()
		Expect(k8s.Create(ctx, byRuntime)).To(Succeed())
		Expect(boundInOneRack(ctx, ns, "by-runtime", 4)).NotTo(Equal(rackOf), "the first job holds that rack")
		wls = workloadsOf(ctx, Default, ns, getTrainJob(ctx, Default, ns, "by-runtime").UID)
		podSets, _, _ = unstructured.NestedSlice(wls[0].Object, "spec", "podSets")
		Expect(podSets).To(ContainElement(HaveKeyWithValue("topologyRequest", HaveKeyWithValue("preferred", platform.LabelTopologyRack))))

		By("a job changes its runtime's level: kiln submit --topology block --topology-preferred replaces the rack")
		out, errOut, code = kilnCLI("", "submit", "-n", ns, "--name", "in-a-block", "--runtime", "torch-distributed-rack", "--nodes", "2",
			"--gpus-per-node", "8", "--queue", "tas", "--topology", "block", "--topology-preferred", "--", "torchrun", "train.py")
		Expect(code).To(Equal(0), out+errOut)
		Eventually(ctx, func(g Gomega) {
			wls := workloadsOf(ctx, g, ns, getTrainJob(ctx, g, ns, "in-a-block").UID)
			g.Expect(wls).To(HaveLen(1))
			podSets, _, _ := unstructured.NestedSlice(wls[0].Object, "spec", "podSets")
			g.Expect(podSets).To(ConsistOf(HaveKeyWithValue("topologyRequest",
				And(HaveKeyWithValue("preferred", platform.LabelTopologyBlock), Not(HaveKey("required"))))))
			g.Expect(conditionStatus(&wls[0], "Admitted")).To(Equal("True"))
		}).WithTimeout(time.Minute).Should(Succeed())
		By("but not its kind: Kueue refuses pods that both require and prefer a topology, and Kiln says so first")
		_, errOut, code = kilnCLI("", "submit", "-n", ns, "--name", "refused", "--runtime", "torch-distributed-rack", "--queue", "tas", "--topology", "block")
		Expect(code).NotTo(Equal(0))
		Expect(errOut).To(ContainSubstring("train_job.spec.topology.preferred"))
		Expect(errOut).To(ContainSubstring("runtime torch-distributed-rack already prefers one rack"))

		By("a level the queue's Topology lacks is refused, naming the levels")
		_, errOut, code = kilnCLI("", "submit", "-n", ns, "--name", "zoned", "--runtime", "torch-distributed", "--queue", "tas", "--topology", "zone")
		Expect(code).NotTo(Equal(0))
		Expect(errOut).To(ContainSubstring(`train_job.spec.topology.level`))
		Expect(errOut).To(ContainSubstring(`no level "zone": the levels are block (%s), rack (%s), host (kubernetes.io/hostname)`, platform.LabelTopologyBlock, platform.LabelTopologyRack))

	})
})
