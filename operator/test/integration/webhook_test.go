package integration

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func nodeSelectorPatch(job string, selector map[string]string) trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: "example.com/platform", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: job, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
			Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{NodeSelector: selector}},
		}}}}},
	}}}
}

func expectInvalid(err error, field, fix string) {
	GinkgoHelper()
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	Expect(err.Error()).To(ContainSubstring(field))
	Expect(err.Error()).To(ContainSubstring(fix))
}

var _ = Describe("TrainJob webhooks", func() {
	It("reject a TrainJob whose runtime does not exist, naming the field and the fix", func(ctx context.Context) {
		err := k8s.Create(ctx, newTrainJob(newNamespace(ctx), "orphan", "no-such-runtime"))
		expectInvalid(err, "spec.runtimeRef.name", `TrainingRuntime "no-such-runtime" not found`)
		Expect(err.Error()).To(ContainSubstring("create the runtime first"))
	})

	It("reject what can never run: no nodes, names too long for the JobSet's pods", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "zero", "torch")
		tj.Spec.Trainer.NumNodes = ptr.To[int32](0)
		expectInvalid(k8s.Create(ctx, tj), "spec.trainer.numNodes", "must be at least 1")

		// The runtime's pods are <name>-node-0-<rank>-<5 random characters>: 15 more.
		long := newTrainJob(ns, strings.Repeat("a", 49), "torch")
		expectInvalid(k8s.Create(ctx, long), "metadata.name", "use a name of at most 48 characters")
		Expect(k8s.Create(ctx, newTrainJob(ns, strings.Repeat("a", 48), "torch"))).To(Succeed())

		generated := newTrainJob(ns, "", "torch")
		generated.GenerateName = strings.Repeat("g", 50)
		expectInvalid(k8s.Create(ctx, generated), "metadata.generateName", "use a generateName of at most 43 characters")
	})

	It("leave what does not decode to the schema, which names the field", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": trainer.GroupVersion.String(), "kind": trainer.TrainJobKind,
			"metadata": map[string]any{"name": "eight", "namespace": ns},
			"spec": map[string]any{
				"runtimeRef": map[string]any{"name": "torch", "kind": trainer.TrainingRuntimeKind},
				"trainer":    map[string]any{"resourcesPerNode": map[string]any{"limits": map[string]any{"nvidia.com/gpu": "eight"}}},
			},
		}}
		expectInvalid(k8s.Create(ctx, u), "spec.trainer.resourcesPerNode.limits", `"eight"`)
	})

	It("reject environment variables the framework owns", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "env", "torch")
		tj.Spec.Trainer.Env = []corev1.EnvVar{{Name: "LR", Value: "1"}, {Name: "PET_NNODES", Value: "8"}}
		expectInvalid(k8s.Create(ctx, tj), "spec.trainer.env[1].name", "PET_NNODES is set by Kiln for torch runtimes")
	})

	It("reject patches of jobs and containers the runtime does not have", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "typo", "torch")
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{nodeSelectorPatch("nodes", map[string]string{"a": "b"})}
		expectInvalid(k8s.Create(ctx, tj), "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name", "the runtime's replicated jobs are [node]")

		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/platform", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
			Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
				Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{Containers: []trainer.ContainerPatch{{Name: "trainer"}}}},
			}}}}},
		}}}}
		expectInvalid(k8s.Create(ctx, tj), "containers[0].name", "job node has no such container")

		tj.Spec.RuntimePatches = []trainer.RuntimePatch{nodeSelectorPatch("node", nil)}
		tj.Spec.RuntimePatches[0].Manager = "platform"
		expectInvalid(k8s.Create(ctx, tj), "spec.runtimePatches[0].manager", "name the manager like example.com/team")
	})

	It("let runtime patches change only while suspended, stamping when they changed", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "patches", "torch")
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{nodeSelectorPatch("node", map[string]string{"pool": "a"})}
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Expect(tj.Spec.RuntimePatches[0].Time).NotTo(BeNil(), "the defaulter stamps new patches")
		stamped := tj.Spec.RuntimePatches[0].Time.DeepCopy()

		expectInvalid(updateTrainJob(ctx, tj, func(tj *trainer.TrainJob) {
			tj.Spec.RuntimePatches[0] = nodeSelectorPatch("node", map[string]string{"pool": "b"})
		}), "spec.runtimePatches", "set spec.suspend to true first")

		Expect(updateTrainJob(ctx, tj, func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) })).To(Succeed())
		Expect(tj.Spec.RuntimePatches[0].Time.Equal(stamped)).To(BeTrue(), "an unchanged patch keeps its time")

		Expect(updateTrainJob(ctx, tj, func(tj *trainer.TrainJob) {
			tj.Spec.RuntimePatches[0] = nodeSelectorPatch("node", map[string]string{"pool": "b"})
		})).To(Succeed())
		Expect(tj.Spec.RuntimePatches[0].Time).NotTo(BeNil())
	})
})

var _ = Describe("TrainJob fields Kueue cannot express", func() {
	It("keep ttlSecondsAfterFinished when Kueue rewrites the TrainJob, and only then", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "kept", "torch")
		tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
		Expect(k8s.Create(ctx, tj)).To(Succeed())

		asKueue := rest.CopyConfig(cfg)
		asKueue.Impersonate = rest.ImpersonationConfig{UserName: preservingUser, Groups: []string{"system:masters"}}
		kueue, err := client.New(asKueue, client.Options{Scheme: k8s.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		dropTTL := func(c client.Client) error {
			for range 20 {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
				if err := c.Get(ctx, client.ObjectKeyFromObject(tj), u); err != nil {
					return err
				}
				unstructured.RemoveNestedField(u.Object, "spec", "ttlSecondsAfterFinished")
				if err := c.Update(ctx, u); !apierrors.IsConflict(err) {
					return err
				}
			}
			return nil
		}
		Expect(dropTTL(kueue)).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), tj)).To(Succeed())
		Expect(tj.Spec.TTLSecondsAfterFinished).To(HaveValue(BeEquivalentTo(60)), "Kueue's rewrite kept the TTL")

		Expect(dropTTL(k8s)).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), tj)).To(Succeed())
		Expect(tj.Spec.TTLSecondsAfterFinished).To(BeNil(), "a user may remove the TTL")
	})

	It("keep the fields of other managers' runtime patches when Kueue rewrites the TrainJob", func(ctx context.Context) {
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		tj := newTrainJob(ns, "grace", "torch")
		tj.Spec.Suspend = ptr.To(true)
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{nodeSelectorPatch("node", map[string]string{"pool": "a"})}
		tj.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
		Expect(k8s.Create(ctx, tj)).To(Succeed())

		asKueue := rest.CopyConfig(cfg)
		asKueue.Impersonate = rest.ImpersonationConfig{UserName: preservingUser, Groups: []string{"system:masters"}}
		kueue, err := client.New(asKueue, client.Options{Scheme: k8s.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		// As Kueue's types encode it: the field they lack is gone, and Kueue adds its patch.
		Eventually(ctx, func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
			if err := kueue.Get(ctx, client.ObjectKeyFromObject(tj), u); err != nil {
				return err
			}
			patches, _, _ := unstructured.NestedSlice(u.Object, "spec", "runtimePatches")
			rjs, _, _ := unstructured.NestedSlice(patches[0].(map[string]any), "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
			unstructured.RemoveNestedField(rjs[0].(map[string]any), "template", "spec", "template", "spec", "terminationGracePeriodSeconds")
			Expect(unstructured.SetNestedSlice(patches[0].(map[string]any), rjs, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")).To(Succeed())
			patches = append(patches, map[string]any{"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"kueue": "admitted"}}}}})
			Expect(unstructured.SetNestedSlice(u.Object, patches, "spec", "runtimePatches")).To(Succeed())
			return kueue.Update(ctx, u)
		}).Should(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), tj)).To(Succeed())
		Expect(tj.Spec.RuntimePatches).To(HaveLen(2), "Kueue's own patch is added")
		Expect(tj.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.TerminationGracePeriodSeconds).To(HaveValue(BeEquivalentTo(10)),
			"the platform's patch kept the field Kueue's types lack")
	})
})
