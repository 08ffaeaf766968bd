package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// migratedPyTorchJob is a Training Operator v1 PyTorchJob as a team would bring it: a
// Master and a Worker, two processes each, torchrun given the flags the v1 operator's
// variables filled in, on the real node. Each worker process prints where torchrun put it.
const migratedPyTorchJob = `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: %[1]s
spec:
  nprocPerNode: "2"
  runPolicy: {ttlSecondsAfterFinished: 600}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template: &pod
        spec:
          nodeSelector: {%[2]s: %[3]s}
          tolerations: [{key: %[2]s, operator: Equal, value: %[3]s, effect: NoSchedule}]
          terminationGracePeriodSeconds: 10
          containers:
          - name: pytorch
            image: %[4]s
            command: [torchrun]
            args:
            - --nnodes=2
            - --nproc_per_node=2
            - --node_rank=$(RANK)
            - --master_addr=$(MASTER_ADDR)
            - --master_port=$(MASTER_PORT)
            - --no_python
            - python3
            - -c
            - |
              import os, torch.distributed as dist
              dist.init_process_group("gloo")
              print(f"node {os.environ['GROUP_RANK']} rank {dist.get_rank()} of {dist.get_world_size()}", flush=True)
              dist.barrier()
              dist.destroy_process_group()
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template: *pod
`

// convertSpecs train on the real node (see onTheRealNode).
func convertSpecs() {
	It("runs a PyTorchJob converted by `kiln submit --convert` to completion, with the world size and ranks it had", func(ctx context.Context) {
		requireRealNode(ctx)
		name := fmt.Sprintf("migrated-%d", GinkgoRandomSeed()%100000)
		DeferCleanup(func() { _, _, _ = kilnCLI("", "delete", name) })
		src := filepath.Join(GinkgoT().TempDir(), "pytorchjob.yaml")
		Expect(os.WriteFile(src, []byte(fmt.Sprintf(migratedPyTorchJob, name, "kiln.dev/node-pool", "real", TorchImage)), 0o600)).To(Succeed())

		out, errOut, code := kilnCLI("", "submit", "-f", src, "--convert", "--wait", "--timeout", "4m")
		Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", out, errOut)
		Expect(errOut).To(ContainSubstring("converted PyTorchJob/" + name + " into TrainJob " + name))
		Expect(errOut).To(ContainSubstring("removed the torchrun flags --nnodes=2, --nproc_per_node=2, --node_rank=$(RANK), --master_addr=$(MASTER_ADDR), --master_port=$(MASTER_PORT)"))
		Expect(out).To(ContainSubstring("Complete"))

		By("every process where the v1 operator would have put it: the Master's node 0 with ranks 0 and 1, the Worker's node 1 with 2 and 3, of 4")
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name})).To(Succeed())
		Expect(pods.Items).To(HaveLen(2))
		var lines []string
		for _, p := range pods.Items {
			logs, err := kubectl("", "logs", "-n", "default", p.Name)
			Expect(err).NotTo(HaveOccurred(), logs)
			lines = append(lines, regexp.MustCompile(`node \d rank \d of \d`).FindAllString(logs, -1)...)
		}
		sort.Strings(lines)
		Expect(strings.Join(lines, "\n")).To(Equal("node 0 rank 0 of 4\nnode 0 rank 1 of 4\nnode 1 rank 2 of 4\nnode 1 rank 3 of 4"))
	})
}
