package e2e

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// escalation is a TrainJob whose one runtime patch sets the "node" pods' spec to podSpec.
func escalation(name, podSpec string) string {
	return fmt.Sprintf(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: %s}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {command: [python, x.py]}
  runtimePatches:
  - manager: example.com/attacker
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  spec: %s
`, name, podSpec)
}

// The local platform's user is bound to kiln-user only: it may create TrainJobs, not pods.
var _ = Describe("A kiln-user tenant", Label(chartMode), func() {
	It("cannot take the node or another ServiceAccount through a TrainJob: each refused naming the field, nothing created", func() {
		for _, tc := range []struct{ name, spec, want string }{
			{"tenant-root", `{volumes: [{name: host, hostPath: {path: /}}], containers: [{name: node, securityContext: {privileged: true, capabilities: {add: [SYS_ADMIN]}}}]}`,
				`runtime patch "example.com/attacker" would run replicated job "node"'s pods with containers[node].securityContext.capabilities.add: SYS_ADMIN, containers[node].securityContext.privileged: true, volumes[host].hostPath (/), which Pod Security's baseline level refuses`},
			// A runtime patch cannot even say it (upstream's patch has no such field); a namespaced runtime can, and is refused too (webhook tests).
			{"tenant-host-network", `{hostNetwork: true}`, `unknown field "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.hostNetwork"`},
			{"tenant-sa", `{serviceAccountName: kiln-demo}`,
				`runtime patch "example.com/attacker" runs replicated job "node"'s pods as ServiceAccount "kiln-demo", which system:serviceaccount:`},
		} {
			_, errOut, code := kilnCLI(escalation(tc.name, tc.spec), "submit", "-f", "-")
			Expect(code).NotTo(Equal(0), "%s was accepted", tc.name)
			Expect(errOut).To(ContainSubstring("spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"), tc.name)
			Expect(errOut).To(ContainSubstring(tc.want), tc.name)
			_, errOut, code = kilnCLI("", "get", tc.name)
			Expect(code).NotTo(Equal(0), "%s exists", tc.name)
			Expect(errOut).To(ContainSubstring("not found"), tc.name)
		}
	})

	It("trains in a namespace that enforces Pod Security's baseline, so no pod there takes the node", func() {
		out, err := kubectl(`apiVersion: v1
kind: Pod
metadata: {name: psa-probe}
spec: {containers: [{name: c, image: busybox, securityContext: {privileged: true}}]}
`, "create", "--dry-run=server", "-n", platform.DefaultNamespace, "-f", "-")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(`violates PodSecurity "baseline:latest": privileged`))
	})
})
