package integration

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

const (
	labelBlock = "cloud.google.com/gce-topology-block"
	labelRack  = "cloud.google.com/gce-topology-subblock"
)

// tasQueue creates a Topology (block, rack, host: GKE's labels), its flavor gpu-tas, a
// ClusterQueue tas-cq on it and LocalQueue tas in ns, and two nodes of rack b0-r1.
func tasQueue(ctx context.Context, ns string) {
	GinkgoHelper()
	applyYAML(ctx, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: tas}
spec:
  levels: [{nodeLabel: %[2]s}, {nodeLabel: %[3]s}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu-tas}
spec: {nodeLabels: {pool: tas}, topologyName: tas}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: tas-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: gpu-tas, resources: [{name: nvidia.com/gpu, nominalQuota: 64}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: tas, namespace: %[1]s}
spec: {clusterQueue: tas-cq}`, ns, labelBlock, labelRack))
	for _, n := range []string{"tas-b0-r1-0", "tas-b0-r1-1"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{labelBlock: "b0", labelRack: "b0-r1", corev1.LabelHostname: n}}}
		Expect(client.IgnoreAlreadyExists(admin.Create(ctx, node))).To(Succeed())
	}
}

var _ = Describe("Topology-aware placement", func() {
	p := protocols[0]
	name := func(s string) string { return p.prefix() + "topo-" + s }

	It("resolves a level of the queue's Topology into Kueue's pod set annotation, refuses one it lacks, and says where the job was placed", func(ctx SpecContext) {
		// A namespace of its own: other specs list team-a's queues.
		const ns = "team-tas"
		createNamespace(ctx, ns)
		bindNamespace(ctx, ns, "alice", "kiln-user", "team-a", "alice")
		alice := p.as("alice")
		tasQueue(ctx, ns)
		teamQueue(ctx, ns, "team-queue")

		By("a rack: Kueue's required-topology annotation on the trainer job, through a runtime patch")
		job := newJob(name("rack"))
		job.Spec.Queue, job.Spec.Suspend = "tas", true
		job.Spec.Topology = &kilnv1.TopologyRequest{Level: "rack"}
		var got *kilnv1.TrainJob
		// The server caches Kueue's objects: the queue just created may take a moment.
		Eventually(ctx, func(g Gomega) {
			res, err := alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
				Namespace: ns, Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: job}}))
			g.Expect(err).NotTo(HaveOccurred())
			got = res.Msg.GetTrainJob()
		}).Should(Succeed())
		Expect(got.GetSpec().GetTopology()).To(And(HaveField("Level", "rack"), HaveField("NodeLabel", labelRack), HaveField("Preferred", false)))
		tj, err := adminTrainJob(ctx, ns, name("rack"))
		Expect(err).NotTo(HaveOccurred())
		Expect(tj.Spec.RuntimePatches).To(HaveLen(1))
		patch := tj.Spec.RuntimePatches[0]
		Expect(patch.Manager).To(Equal("kiln.dev/topology"))
		rj := patch.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs
		Expect(rj).To(HaveLen(1))
		Expect(rj[0].Name).To(Equal("node"))
		Expect(rj[0].Template.Spec.Template.Metadata.Annotations).To(Equal(map[string]string{"kueue.x-k8s.io/podset-required-topology": labelRack}))

		By("a block, preferred, by its node label")
		job = newJob(name("block"))
		job.Spec.Queue = "tas"
		job.Spec.Topology = &kilnv1.TopologyRequest{Level: labelBlock, Preferred: true}
		got = create(ctx, alice, ns, job)
		Expect(got.GetSpec().GetTopology()).To(And(HaveField("Level", "block"), HaveField("NodeLabel", labelBlock), HaveField("Preferred", true)))

		By("refused, naming the field and the fix: a level the Topology lacks, a queue without one")
		for _, tc := range []struct{ queue, level, says string }{
			{"tas", "zone", `queue tas places on Kueue Topology "tas", which has no level "zone": the levels are block (` + labelBlock + `), rack (` + labelRack + `), host (kubernetes.io/hostname)`},
			{"team-queue", "rack", "queue team-queue (ClusterQueue team-cq) has no flavor with a Kueue Topology"},
			{"", "rack", `the job names none (nor has its namespace a LocalQueue "default"): set queue`},
		} {
			job := newJob(name("refused"))
			job.Spec.Queue = tc.queue
			job.Spec.Topology = &kilnv1.TopologyRequest{Level: tc.level}
			_, err := alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
				Namespace: ns, Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: job}}))
			Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument), tc.says)
			Expect(fieldViolations(err)).To(ConsistOf("train_job.spec.topology.level"))
			Expect(err.Error()).To(ContainSubstring(tc.says))
		}
		_, err = adminTrainJob(ctx, ns, name("refused"))
		Expect(err).To(HaveOccurred(), "nothing was created")

		By("where Kueue placed it: the hostnames of its assignment, with their nodes' block and rack")
		wl := &unstructured.Unstructured{}
		wl.SetAPIVersion("kueue.x-k8s.io/v1beta2")
		wl.SetKind("Workload")
		wl.SetNamespace(ns)
		wl.SetName("trainjob-" + name("rack") + "-1a2b3")
		wl.SetLabels(map[string]string{trainer.KueueJobUIDLabel: string(tj.UID)})
		wl.Object["spec"] = map[string]any{
			"queueName": "tas",
			"podSets": []any{map[string]any{"name": "node", "count": int64(2),
				"topologyRequest": map[string]any{"required": labelRack},
				"template":        map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "node", "image": "img"}}}}}},
		}
		Expect(admin.Create(ctx, wl)).To(Succeed())
		now := metav1.Now().UTC().Format(time.RFC3339)
		wl.Object["status"] = map[string]any{
			"admission": map[string]any{"clusterQueue": "tas-cq", "podSetAssignments": []any{map[string]any{
				"name": "node", "count": int64(2), "flavors": map[string]any{"nvidia.com/gpu": "gpu-tas"},
				"resourceUsage": map[string]any{"nvidia.com/gpu": "16"},
				"topologyAssignment": map[string]any{"levels": []any{"kubernetes.io/hostname"}, "slices": []any{map[string]any{
					"domainCount":    int64(2),
					"valuesPerLevel": []any{map[string]any{"individual": map[string]any{"prefix": "tas-b0-r1-", "roots": []any{"0", "1"}}}},
					"podCounts":      map[string]any{"universal": int64(1)},
				}}},
			}}},
			"conditions": []any{
				map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved", "lastTransitionTime": now},
				map[string]any{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted", "lastTransitionTime": now},
			},
		}
		Expect(admin.Status().Update(ctx, wl)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			res, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: ns, Name: name("rack")}))
			g.Expect(err).NotTo(HaveOccurred())
			pl := res.Msg.GetTrainJob().GetStatus().GetPlacement()
			g.Expect(pl.GetTopology()).To(Equal("tas"))
			g.Expect(pl.GetLevels()).To(HaveLen(3))
			g.Expect(pl.GetLevels()[1].GetName()).To(Equal("rack"))
			g.Expect(pl.GetPodSets()).To(HaveLen(1))
			ps := pl.GetPodSets()[0]
			g.Expect(ps.GetFlavor()).To(Equal("gpu-tas"))
			g.Expect(ps.GetRequiredLevel()).To(Equal("rack"))
			g.Expect(ps.GetDomains()).To(HaveLen(2))
			g.Expect(ps.GetDomains()[0].GetValues()).To(Equal([]string{"b0", "b0-r1", "tas-b0-r1-0"}))
			g.Expect(ps.GetDomains()[1].GetValues()).To(Equal([]string{"b0", "b0-r1", "tas-b0-r1-1"}))
			g.Expect(ps.GetDomains()[1].GetPods()).To(BeEquivalentTo(1))
		}).Should(Succeed())
	})
})
