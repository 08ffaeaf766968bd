package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

const everyMinute = `apiVersion: kiln.dev/v1alpha1
kind: CronTrainJob
metadata:
  name: every-minute
spec:
  schedule: "* * * * *"
  concurrencyPolicy: Forbid
  trainJobTemplate:
    spec:
      runtimeRef: {name: torch-distributed}
      trainer: {command: [torchrun, retrain.py], numNodes: 1}
`

var _ = Describe("CronTrainJob on the platform", func() {
	It("fires on its schedule: a run that completes, told its scheduled time; deleting it deletes its runs", func(ctx context.Context) {
		ns := newNamespace(ctx, "cron")
		cj := &unstructured.Unstructured{}
		Expect(yamlInto(everyMinute, cj)).To(Succeed())
		cj.SetNamespace(ns)
		Expect(k8s.Create(ctx, cj)).To(Succeed())

		var run trainer.TrainJob
		Eventually(ctx, func(g Gomega) {
			runs := &trainer.TrainJobList{}
			g.Expect(k8s.List(ctx, runs, client.InNamespace(ns), client.MatchingLabels{"kiln.dev/cron-train-job": "every-minute"})).To(Succeed())
			g.Expect(runs.Items).NotTo(BeEmpty())
			run = runs.Items[0]
			g.Expect(meta.IsStatusConditionTrue(run.Status.Conditions, trainer.TrainJobComplete)).To(BeTrue())
		}).WithTimeout(150 * time.Second).Should(Succeed())
		scheduled, err := time.Parse(time.RFC3339, run.Annotations["kiln.dev/scheduled-time"])
		Expect(err).NotTo(HaveOccurred())
		Expect(scheduled.Second()).To(BeZero())
		Expect(run.Spec.Trainer.Env).To(ContainElement(And(HaveField("Name", "KILN_SCHEDULED_TIME"), HaveField("Value", scheduled.UTC().Format(time.RFC3339)))))

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cj), cj)).To(Succeed())
		last, _, _ := unstructured.NestedString(cj.Object, "status", "lastScheduleTime")
		Expect(last).NotTo(BeEmpty())

		Expect(k8s.Delete(ctx, cj, client.PropagationPolicy("Foreground"))).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			runs := &trainer.TrainJobList{}
			g.Expect(k8s.List(ctx, runs, client.InNamespace(ns))).To(Succeed())
			g.Expect(runs.Items).To(BeEmpty())
		}).Should(Succeed())
	})
})
