package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/api/clientconfig"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// realNodeRuntime is the cluster's torch-distributed as a TrainingRuntime of namespace ns
// whose pods run TorchImage on the real node: a Kubeflow script's get_runtime finds the
// namespace's runtime first, so the script itself says nothing of where it runs.
func realNodeRuntime(ctx context.Context, ns string) *trainer.TrainingRuntime {
	GinkgoHelper()
	cluster := &trainer.ClusterTrainingRuntime{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "torch-distributed"}, cluster)).To(Succeed())
	rt := &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster.Name, Labels: cluster.Labels},
		Spec:       *cluster.Spec.DeepCopy(),
	}
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		pod.NodeSelector, pod.Tolerations = onRealNode.selector, onRealNode.tolerations
		pod.TerminationGracePeriodSeconds = ptr.To[int64](10)
		for j := range pod.Containers {
			pod.Containers[j].Image = TorchImage
		}
	}
	return rt
}

// kubeflowScript runs sdk-gen/python/examples/kubeflow/<script> as its user would, as the
// local platform's user in namespace ns (env added), and returns what it printed.
func kubeflowScript(ns, script string, env ...string) string {
	GinkgoHelper()
	root := os.Getenv("KILN_ROOT")
	if root == "" || os.Getenv("KILN_CONFIG") == "" {
		Skip("KILN_ROOT and KILN_CONFIG are not set: not on the local platform")
	}
	sdk := filepath.Join(root, "sdk-gen", "python")
	cmd := exec.Command("python3", filepath.Join(sdk, "examples", "kubeflow", script))
	cmd.Env = append(append(os.Environ(), "PYTHONPATH="+sdk, "KILN_NAMESPACE="+ns), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s failed:\n%s", script, out)
	GinkgoWriter.Printf("%s took %s\n", script, time.Since(start).Round(100*time.Millisecond))
	return string(out)
}

// demoKubeconfig is a kubeconfig of the cluster with the local platform's user's token, its
// namespace ns: what a user of a cluster has, and no Kiln configuration.
func demoKubeconfig(ns string) string {
	GinkgoHelper()
	kc, err := clientconfig.Load(os.Getenv("KILN_CONFIG"))
	Expect(err).NotTo(HaveOccurred())
	demo := kc.Context(kc.CurrentContext)
	Expect(demo).NotTo(BeNil(), "the Kiln configuration has no current context")
	ca := cfg.CAData
	if len(ca) == 0 {
		ca, err = os.ReadFile(cfg.CAFile)
		Expect(err).NotTo(HaveOccurred())
	}
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: kiln, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: demo, user: {token: %q}}]
contexts: [{name: demo, context: {cluster: kiln, user: demo, namespace: %s}}]
current-context: demo
`, cfg.Host, base64.StdEncoding.EncodeToString(ca), demo.Token, ns), 0o600)).To(Succeed())
	return path
}

// kubeflowSDKSpecs are the Kubeflow SDK's own examples, unchanged but for their imports.
func kubeflowSDKSpecs() {
	BeforeEach(func(ctx context.Context) { requireRealNode(ctx) })

	It("runs Kubeflow SDK scripts with only the import changed: runtimes listed, functions trained with torch DDP, a container with options; slow: three jobs of real torchrun", func(ctx context.Context) {
		ns := newNamespace(ctx, "kubeflow-sdk")
		letCLIUserIn(ctx, ns)
		Expect(k8s.Create(ctx, realNodeRuntime(ctx, ns))).To(Succeed())

		By("list_runtimes: Kubeflow's Runtime, framework and devices")
		Expect(kubeflowScript(ns, "list_runtimes.py")).To(MatchRegexp(`torch-distributed\n  framework: torch, nodes: 1, device: \w+ x \w+`))

		By("with only a kubeconfig, as Kubeflow's TrainerClient() is used: kube-public/kiln-info says where Kiln is")
		Expect(kubeflowScript(ns, "list_runtimes.py", "KILN_CONFIG="+filepath.Join(GinkgoT().TempDir(), "none.yaml"), "KUBECONFIG="+demoKubeconfig(ns))).
			To(ContainSubstring("torch-distributed\n  framework: torch"))

		By("the README's first job: a function on 3 nodes, each in a world of 3")
		out := kubeflowScript(ns, "readme_first_job.py")
		for _, line := range []string{"PyTorch Distributed Environment", "WORLD_SIZE: 3", "RANK: 0", "LOCAL_RANK: 0"} {
			Expect(out).To(ContainSubstring(line+"\n"), "node-0's log")
		}

		By("the getting-started function with func_args: DDP over gloo, the loss falls")
		out = kubeflowScript(ns, "custom_training_ddp.py")
		Expect(out).To(ContainSubstring("rank 0 of 2"))
		var losses []float64
		for _, m := range regexp.MustCompile(`Step (\d+), Loss: ([0-9.]+)`).FindAllStringSubmatch(out, -1) {
			l, _ := strconv.ParseFloat(m[2], 64)
			losses = append(losses, l)
		}
		Expect(losses).To(HaveLen(20), out)
		Expect(losses[19]).To(BeNumerically("<", losses[0]/5), "the loss must fall:\n%s", out)

		By("a container with options: its name, labels, annotations and command as Kubeflow applies them")
		Expect(kubeflowScript(ns, "container_options.py")).To(ContainSubstring("hello from node 0 of 2"))
		tj := &trainer.TrainJob{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "experiment-001"}, tj)).To(Succeed())
		Expect(tj.Labels).To(HaveKeyWithValue("project", "llm-finetune"))
		Expect(tj.Annotations).To(HaveKeyWithValue("author", "alice"))
		Expect(ptr.Deref(tj.Spec.RuntimeRef.Kind, "")).To(Equal(trainer.TrainingRuntimeKind), "the namespace's runtime, as get_runtime found it")

		By("every job ran on the real node")
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		Expect(pods.Items).To(HaveLen(3 + 2 + 2))
		for _, p := range pods.Items {
			Expect(p.Spec.NodeName).To(Equal(platform.RealNodeName), p.Name)
		}
	})
}
