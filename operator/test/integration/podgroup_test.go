package integration

import (
	"context"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/runtimes"
)

// gangRuntime creates a TrainingRuntime from the catalog's torch-distributed with a
// podGroupPolicy.
func gangRuntime(ctx context.Context, ns, name string, policy trainer.PodGroupPolicySource, annotations map[string]string) {
	rt, err := runtimes.ClusterTrainingRuntime("torch-distributed")
	Expect(err).NotTo(HaveOccurred())
	spec := rt.Spec.DeepCopy()
	spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: policy}
	spec.Template.Annotations = annotations
	Expect(k8s.Create(ctx, &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: *spec})).To(Succeed())
}

func podGroupOf(ctx context.Context, g Gomega, apiVersion string, tj *trainer.TrainJob) *unstructured.Unstructured {
	pg := &unstructured.Unstructured{}
	pg.SetAPIVersion(apiVersion)
	pg.SetKind("PodGroup")
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), pg)).To(Succeed())
	return pg
}

// installPodGroupCRDs installs scheduler-plugins' and Volcano's PodGroup CRDs, as `make`
// writes them from the pinned modules.
func installPodGroupCRDs(ctx context.Context) {
	for _, f := range []string{"podgroups-coscheduling.yaml", "podgroups-volcano.yaml"} {
		objs, err := kilntesting.ReadManifests(filepath.Join("..", "..", "..", "bin", "manifests", f))
		Expect(err).NotTo(HaveOccurred(), "run make test-integration, which writes them")
		for _, o := range objs {
			err := k8s.Create(ctx, o)
			if !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
			Eventually(ctx, func(g Gomega) {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), crd)).To(Succeed())
				established := false
				for _, c := range crd.Status.Conditions {
					established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
				}
				g.Expect(established).To(BeTrue())
			}).Should(Succeed())
		}
	}
}

var _ = Describe("Gang scheduling (podGroupPolicy)", Ordered, func() {
	var ns string
	BeforeAll(func(ctx context.Context) {
		ns = newNamespace(ctx)
		gangRuntime(ctx, ns, "gang", trainer.PodGroupPolicySource{Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](45)}}, nil)
		gangRuntime(ctx, ns, "volcano", trainer.PodGroupPolicySource{Volcano: &trainer.VolcanoPodGroupPolicySource{
			NetworkTopology: &trainer.NetworkTopologySpec{Mode: "hard", HighestTierAllowed: ptr.To(1)},
		}}, map[string]string{"scheduling.volcano.sh/queue-name": "research"})
	})

	It("holds a job while the cluster serves no PodGroup, says why, and starts it once it does", func(ctx context.Context) {
		tj := newTrainJob(ns, "early", "gang")
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			events := &corev1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			var msgs []string
			for _, e := range events.Items {
				if e.Reason == "PodGroupUnavailable" && e.InvolvedObject.Name == tj.Name {
					msgs = append(msgs, e.Message)
				}
			}
			g.Expect(msgs).To(ContainElement(And(ContainSubstring("podGroupPolicy.coscheduling"),
				ContainSubstring("PodGroup.scheduling.x-k8s.io"), ContainSubstring("install its CRD"))))
		}).Should(Succeed())
		Consistently(ctx, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tj), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}}))
		}, 2*time.Second).Should(BeTrue(), "no JobSet whose pods name a PodGroup that cannot exist")

		By("installing the PodGroup CRDs")
		installPodGroupCRDs(ctx)
		Eventually(ctx, func(g Gomega) {
			podGroupOf(ctx, g, "scheduling.x-k8s.io/v1alpha1", tj)
			jobSetOf(ctx, g, tj)
		}, time.Minute).Should(Succeed(), "retried with backoff until the kind is served")
	})

	It("creates the coscheduling PodGroup of every pod, owned by the job, before its JobSet", func(ctx context.Context) {
		installPodGroupCRDs(ctx)
		tj := newTrainJob(ns, "gang", "gang")
		tj.Spec.Trainer.NumNodes = ptr.To[int32](4)
		tj.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), "nvidia.com/gpu": resource.MustParse("8")},
			Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
		}
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			js := jobSetOf(ctx, g, tj)
			pg := podGroupOf(ctx, g, "scheduling.x-k8s.io/v1alpha1", tj)
			g.Expect(pg.GetCreationTimestamp().Time).NotTo(BeTemporally(">", js.CreationTimestamp.Time))
			g.Expect(metav1.IsControlledBy(pg, tj)).To(BeTrue())
			g.Expect(pg.Object["spec"]).To(Equal(map[string]any{
				"minMember":              int64(4),
				"minResources":           map[string]any{"cpu": "8", "nvidia.com/gpu": "32"},
				"scheduleTimeoutSeconds": int64(45),
			}))
			for _, rj := range js.Spec.ReplicatedJobs {
				g.Expect(rj.Template.Spec.Template.Labels).To(HaveKeyWithValue("scheduling.x-k8s.io/pod-group", tj.Name))
			}
		}).Should(Succeed())
	})

	It("renders Volcano's PodGroup as Volcano's CRD accepts it", func(ctx context.Context) {
		installPodGroupCRDs(ctx)
		tj := newTrainJob(ns, "volcano", "volcano")
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			js := jobSetOf(ctx, g, tj)
			pg := podGroupOf(ctx, g, "scheduling.volcano.sh/v1beta1", tj)
			g.Expect(metav1.IsControlledBy(pg, tj)).To(BeTrue())
			spec := pg.Object["spec"].(map[string]any)
			g.Expect(spec).To(HaveKeyWithValue("minMember", int64(2)))
			g.Expect(spec).To(HaveKeyWithValue("queue", "research"))
			g.Expect(spec).To(HaveKeyWithValue("networkTopology", map[string]any{"mode": "hard", "highestTierAllowed": int64(1)}))
			for _, rj := range js.Spec.ReplicatedJobs {
				g.Expect(rj.Template.Spec.Template.Annotations).To(HaveKeyWithValue("scheduling.k8s.io/group-name", tj.Name))
			}
		}).Should(Succeed())
	})
})
