package e2e

import (
	"context"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// What a user types either works or says why: a job that would wait forever is refused or
// warned at once, on every surface, with the numbers and the names that exist.
var _ = Describe("No dead ends at submission", Label(chartMode), func() {
	It("warns of a job its queue can never admit, a claim the namespace lacks, and no command, as kubectl and kiln print it", func() {
		By("more GPUs than the ClusterQueue can ever admit: the numbers, and nothing created")
		out, errOut, code := kilnCLI("", "submit", "--dry-run", "-o", "name", "--runtime", "torch-distributed", "--name", "deadend-huge",
			"--queue", "default", "--nodes", "1000", "--gpus-per-node", "8", "--", "python", "x.py")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("deadend-huge\n"), "-o name prints the name, also on a dry run")
		Expect(errOut).To(ContainSubstring(`Warning: this job can never be admitted: it asks for `))
		Expect(errOut).To(ContainSubstring(`8000 nvidia.com/gpu (at most `))
		Expect(errOut).To(ContainSubstring(`of its ClusterQueue`))

		By("a runtime whose claim the namespace lacks, and no command anywhere")
		_, errOut, code = kilnCLI("", "submit", "--dry-run", "--runtime", "torch-distributed-spot", "--name", "deadend-claim", "--queue", "default")
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).To(ContainSubstring(`Warning: PersistentVolumeClaim "kiln-checkpoints" does not exist in namespace default: the job's pods (volume `))
		Expect(errOut).To(ContainSubstring(`Warning: no command: neither spec.trainer.command nor runtime "torch-distributed-spot" says what to run`))

		By("a manifest that names no queue, put in the namespace's default LocalQueue by Kueue: said, not silent")
		_, errOut, code = kilnCLI(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: deadend-no-queue}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {command: [python, x.py]}
`, "submit", "-f", "-", "--dry-run")
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).To(ContainSubstring(`Warning: queued in LocalQueue "default", the namespace's default (Kueue chose it: the job names no queue)`))

		By("kubectl: a queue that does not exist is a warning (Kueue lets it be created later), naming the queues there")
		manifest, err := os.ReadFile("testdata/bad-queue-trainjob.yaml")
		Expect(err).NotTo(HaveOccurred())
		kout, err := kubectl(string(manifest), "create", "--dry-run=server", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), kout)
		Expect(kout).To(ContainSubstring(`Warning: LocalQueue "gpu-queue" does not exist in namespace default: the job waits until it is created. Queues there: "default"`))
	})

	It("warns of a job no node can run: a resource no node offers, more per pod than the largest node offers", func(ctx SpecContext) {
		ns := newNamespace(ctx, "deadend-nodes") // no LocalQueue: Kueue's quota does not speak for the nodes here
		letCLIUserIn(ctx, ns)
		_, errOut, code := kilnCLI("", "submit", "--dry-run", "-n", ns, "--runtime", "torch-distributed", "--name", "deadend-big",
			"--gpus-per-node", "64", "--", "python", "x.py")
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).To(ContainSubstring("Warning: each pod of node asks for 64 nvidia.com/gpu, more than any node offers (at most "))
		_, errOut, code = kilnCLI("", "submit", "--dry-run", "-n", ns, "--runtime", "torch-distributed", "--name", "deadend-mig",
			"--gpu-resource", "nvidia.com/mig-1g.5gb", "--gpus-per-node", "1", "--", "python", "x.py")
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).To(ContainSubstring("Warning: no node offers nvidia.com/mig-1g.5gb, of which each pod of node asks for 1: its pods would stay Pending"))
	})

	It("gives a job whose LocalQueue does not exist no place in line, and says why", func(ctx SpecContext) {
		// kubectl may create it (with the warning above); kiln describe must not contradict itself.
		tj := kilntesting.MakeTrainJob("deadend-ghost-queue", "default").Queue("ghost-queue").Command("python", "x.py").Obj()
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, tj))).To(Succeed()) })
		Eventually(func(g Gomega) {
			out, errOut, code := kilnCLI("", "describe", tj.Name)
			g.Expect(code).To(Equal(0), errOut)
			g.Expect(out).To(ContainSubstring("ghost-queue (no such LocalQueue in this namespace"))
			g.Expect(out).NotTo(ContainSubstring("in this queue"))
			g.Expect(strings.Count(out, "doesn't exist")).To(BeNumerically("<=", 1))
		}).Should(Succeed())
		Expect(tj.Labels).To(HaveKeyWithValue(trainer.KueueQueueNameLabel, "ghost-queue"))
	})
})
