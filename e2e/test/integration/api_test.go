package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/api/testing/pinned"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/runtimes"
)

// upstreamTrainerDir is the pinned Kubeflow Trainer module (tools/trainer).
func upstreamTrainerDir() string {
	dir, err := pinned.ModuleDir("trainer", "github.com/kubeflow/trainer/v2")
	Expect(err).NotTo(HaveOccurred())
	return dir
}

func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

var _ = Describe("The trainer.kubeflow.org API", func() {
	It("accepts the runtime catalog", func(ctx context.Context) {
		rts, err := runtimes.ClusterTrainingRuntimes()
		Expect(err).NotTo(HaveOccurred())
		for _, rt := range rts {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{Object: m}
			unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
			Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kiln-test"), client.ForceOwnership)).To(Succeed(), rt.Name)
		}
	})

	It("accepts every upstream Kubeflow Trainer v2.3 runtime and example unchanged", func(ctx context.Context) {
		up := upstreamTrainerDir()
		ns := newNamespace(ctx)
		var files []string
		for _, root := range []string{filepath.Join(up, "manifests", "base", "runtimes"), filepath.Join(up, "examples", "yaml")} {
			Expect(filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") && filepath.Base(path) != "kustomization.yaml" {
					files = append(files, path)
				}
				return err
			})).To(Succeed())
		}
		applied := 0
		for _, f := range files {
			objs, err := kilntesting.ReadManifests(f)
			Expect(err).NotTo(HaveOccurred())
			for _, obj := range objs {
				if obj.GroupVersionKind().Group != trainer.GroupVersion.Group {
					continue
				}
				if obj.GetKind() != trainer.ClusterTrainingRuntimeKind {
					obj.SetNamespace(ns)
				} else {
					obj.SetName("upstream-" + obj.GetName())
				}
				Expect(k8s.Create(ctx, obj)).To(Succeed(), "%s: %s %s", f, obj.GetKind(), obj.GetName())
				applied++
			}
		}
		Expect(applied).To(BeNumerically(">=", 14))
	})

	DescribeTable("rejects a runtime that sets its own cleanup or deadline",
		func(ctx context.Context, mutate func(*jobsetv1alpha2.JobSetSpec), wantMessage string) {
			rts, err := runtimes.ClusterTrainingRuntimes()
			Expect(err).NotTo(HaveOccurred())
			rt := &trainer.TrainingRuntime{
				ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: newNamespace(ctx)},
				Spec:       *rts[0].Spec.DeepCopy(),
			}
			mutate(&rt.Spec.Template.Spec)
			err = k8s.Create(ctx, rt)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(wantMessage))
			Expect(err.Error()).To(ContainSubstring("spec.runPolicy"))
		},
		Entry("JobSet ttlSecondsAfterFinished", func(s *jobsetv1alpha2.JobSetSpec) { s.TTLSecondsAfterFinished = ptr.To[int32](60) },
			"template.spec.ttlSecondsAfterFinished must not be set"),
		Entry("Job ttlSecondsAfterFinished", func(s *jobsetv1alpha2.JobSetSpec) {
			s.ReplicatedJobs[0].Template.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
		}, "template.spec.replicatedJobs[].template.spec.ttlSecondsAfterFinished must not be set"),
		Entry("Job activeDeadlineSeconds", func(s *jobsetv1alpha2.JobSetSpec) {
			s.ReplicatedJobs[0].Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
		}, "template.spec.replicatedJobs[].template.spec.activeDeadlineSeconds must not be set"),
	)

	It("keeps runPolicy on runtimes", func(ctx context.Context) {
		rts, err := runtimes.ClusterTrainingRuntimes()
		Expect(err).NotTo(HaveOccurred())
		rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "with-policy", Namespace: newNamespace(ctx)}, Spec: *rts[0].Spec.DeepCopy()}
		rt.Spec.RunPolicy = &trainer.RunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3600), TTLSecondsAfterFinished: ptr.To[int32](0)}
		Expect(k8s.Create(ctx, rt)).To(Succeed())
		got := &trainer.TrainingRuntime{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(rt), got)).To(Succeed())
		Expect(got.Spec.RunPolicy).To(Equal(rt.Spec.RunPolicy))
	})

	It("makes a TrainJob's deadline immutable and its TTL mutable", func(ctx context.Context) {
		tj := kilntesting.MakeTrainJob("lifecycle", newNamespace(ctx)).ActiveDeadlineSeconds(3600).TTLSecondsAfterFinished(60).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Expect(tj.Spec.RuntimeRef.Kind).To(HaveValue(Equal(trainer.ClusterTrainingRuntimeKind)), "defaulted by the CRD")
		Expect(tj.Spec.ManagedBy).To(HaveValue(Equal(trainer.TrainJobControllerName)))

		ttl := tj.DeepCopy()
		ttl.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
		Expect(k8s.Update(ctx, ttl)).To(Succeed())

		deadline := ttl.DeepCopy()
		deadline.Spec.ActiveDeadlineSeconds = ptr.To[int64](7200)
		err := k8s.Update(ctx, deadline)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.activeDeadlineSeconds"))
		Expect(err.Error()).To(ContainSubstring("field is immutable"))

		negative := ttl.DeepCopy()
		negative.Spec.TTLSecondsAfterFinished = ptr.To[int32](-1)
		Expect(apierrors.IsInvalid(k8s.Update(ctx, negative))).To(BeTrue())
	})

	It("keeps Kiln's status fields", func(ctx context.Context) {
		tj := kilntesting.MakeTrainJob("status", newNamespace(ctx)).Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		now := metav1.Now()
		tj.Status.StartTime, tj.Status.CompletionTime = &now, &now
		Expect(k8s.Status().Update(ctx, tj)).To(Succeed())
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), got)).To(Succeed())
		Expect(got.Object["status"]).To(HaveKey("startTime"))
		Expect(got.Object["status"]).To(HaveKey("completionTime"))
	})
})
