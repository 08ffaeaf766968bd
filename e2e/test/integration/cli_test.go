package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/test/framework"
)

// The kiln CLI, as built into bin/, against the real API server (bin/kiln-apiserver, run
// as its own ServiceAccount with its RBAC) over envtest. No operator runs: jobs stay as
// created, which is all the CLI needs to be shown right.
var _ = Describe("kiln CLI against the API server", Ordered, func() {
	var (
		kilnConfig string
		server     *exec.Cmd
	)

	// kiln runs bin/kiln as the user of kilnConfig, in a pipe; it returns stdout, stderr
	// and the exit code.
	kiln := func(args ...string) (string, string, int) {
		GinkgoHelper()
		return framework.CLI{Bin: filepath.Join(binDir, "kiln"), Env: []string{clientconfig.EnvConfig + "=" + kilnConfig}}.Run("", args...)
	}

	BeforeAll(func(ctx context.Context) {
		Expect(filepath.Join(binDir, "kiln")).To(BeAnExistingFile(), "make test-integration builds bin/kiln")
		Expect(filepath.Join(binDir, "kiln-apiserver")).To(BeAnExistingFile(), "make test-integration builds bin/kiln-apiserver")
		root, err := platform.RepoRoot("")
		Expect(err).NotTo(HaveOccurred())
		rbac, err := platform.APIServerRBAC(root)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range rbac {
			Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("test"), client.ForceOwnership)).To(Succeed())
		}
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		token := func(ns, sa string) string {
			Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}))).To(Succeed())
			t, err := platform.ServiceAccountToken(ctx, cs, ns, sa, 3600)
			Expect(err).NotTo(HaveOccurred())
			return t
		}
		bind := func(kind, ns, name, role, saNS, sa string) {
			Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(platform.Binding(kind, ns, name, role, saNS, sa)), client.FieldOwner("test"), client.ForceOwnership)).To(Succeed())
		}
		serverToken := token("kiln-system", "kiln-apiserver")
		bind("ClusterRoleBinding", "", "kiln-apiserver", "kiln-apiserver", "kiln-system", "kiln-apiserver")
		userToken := token("ml", "ada")
		bind("RoleBinding", "ml", "ada", "kiln-user", "ml", "ada")
		bind("ClusterRoleBinding", "", "ada-viewer", "kiln-cluster-viewer", "ml", "ada")
		Expect(yamlApply(ctx, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed, labels: {trainer.kubeflow.org/framework: torch}}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec:
            template:
              spec:
                containers: [{name: node, image: pytorch/pytorch:2.7.1}]
`)).To(Succeed())

		dir := GinkgoT().TempDir()
		kc := clientcmdapi.NewConfig()
		kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
		kc.AuthInfos["server"] = &clientcmdapi.AuthInfo{Token: serverToken}
		kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "server"}
		kc.CurrentContext = "envtest"
		kubeconfig := filepath.Join(dir, "kubeconfig")
		Expect(clientcmd.WriteToFile(*kc, kubeconfig)).To(Succeed())
		port := freePort()
		server = exec.Command(filepath.Join(binDir, "kiln-apiserver"), "--kubeconfig="+kubeconfig, fmt.Sprintf("--listen-address=127.0.0.1:%d", port))
		server.Stdout, server.Stderr = GinkgoWriter, GinkgoWriter
		Expect(server.Start()).To(Succeed())
		DeferCleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		Eventually(func() int {
			res, err := http.Get(url + "/readyz")
			if err != nil {
				return 0
			}
			res.Body.Close()
			return res.StatusCode
		}).WithTimeout(60 * time.Second).Should(Equal(http.StatusOK))

		kilnConfig = filepath.Join(dir, "kiln.yaml")
		c := &clientconfig.Config{CurrentContext: "envtest", Contexts: []clientconfig.Context{{Name: "envtest", Server: url, Token: userToken, Namespace: "ml"}}}
		Expect(c.Save(kilnConfig)).To(Succeed())
	})

	It("submits by flags, lists, gets, describes, suspends, resumes and deletes", func(ctx context.Context) {
		out, errOut, code := kiln("submit", "--runtime", "torch-distributed", "--name", "mnist", "--nodes", "2", "--gpus-per-node", "8",
			"--deadline", "8h", "--ttl", "1d", "--env", "LR=0.1", "--", "torchrun", "train.py")
		Expect(code).To(Equal(0), errOut)
		Expect(out).To(Equal("trainjob ml/mnist created\n"))
		tj := &trainer.TrainJob{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "mnist"}, tj)).To(Succeed())
		Expect(*tj.Spec.ActiveDeadlineSeconds).To(BeEquivalentTo(8 * 3600))
		Expect(*tj.Spec.TTLSecondsAfterFinished).To(BeEquivalentTo(86400))
		Expect(tj.Spec.Trainer.Command).To(Equal([]string{"torchrun", "train.py"}))

		Eventually(func() string { out, _, _ := kiln("list"); return out }).Should(MatchRegexp(`^mnist\ttorch-distributed\t-\tRunning\t2\t\d+s\t-\t-\n$`))

		out, _, code = kiln("get", "mnist", "-o", "json")
		Expect(code).To(Equal(0))
		var got map[string]any
		Expect(json.Unmarshal([]byte(out), &got)).To(Succeed())
		Expect(got).To(HaveKeyWithValue("name", "mnist"))
		Expect(got["status"]).To(HaveKeyWithValue("state", "STATE_RUNNING"))

		out, _, code = kiln("describe", "mnist")
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("Runtime:        torch-distributed (ClusterTrainingRuntime)"))
		Expect(out).To(ContainSubstring("Nodes:          2, each nvidia.com/gpu=8"))
		Expect(out).To(ContainSubstring("TTL:            deleted 24h after it finishes"))

		out, _, code = kiln("suspend", "mnist")
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("trainjob ml/mnist suspended\n"))
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "mnist"}, tj)).To(Succeed())
		Expect(*tj.Spec.Suspend).To(BeTrue())
		_, _, code = kiln("wait", "mnist", "--for", "Suspended", "--timeout", "20s")
		Expect(code).To(Equal(0))
		_, _, code = kiln("resume", "mnist")
		Expect(code).To(Equal(0))
		_, _, code = kiln("wait", "mnist", "--for", "Running", "--timeout", "20s")
		Expect(code).To(Equal(0))
		_, errOut, code = kiln("wait", "mnist", "--for", "Complete", "--timeout", "1s")
		Expect(code).To(Equal(4), "no operator runs: the job never completes")
		Expect(errOut).To(Equal("kiln: timed out after 1s waiting for mnist to be Complete\n"))

		out, _, code = kiln("delete", "mnist")
		Expect(code).To(Equal(0))
		Expect(out).To(Equal("trainjob ml/mnist deleted\n"))
	})

	It("submits a manifest from standard input, and dry-runs one", func(ctx context.Context) {
		manifest := `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: from-stdin}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {command: [python, train.py]}
`
		// Specs run in a random order, and the Kueue one may have installed Kueue's CRDs
		// already: the API server then refuses a queue that does not exist, so it must.
		lq := &unstructured.Unstructured{}
		lq.SetGroupVersionKind(kueue.GroupVersion.WithKind("LocalQueue"))
		lq.SetNamespace("ml")
		lq.SetName("team")
		Expect(unstructured.SetNestedField(lq.Object, "cluster-queue", "spec", "clusterQueue")).To(Succeed())
		if err := k8s.Create(ctx, lq); !meta.IsNoMatchError(err) {
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx context.Context) { Expect(k8s.Delete(ctx, lq)).To(Succeed()) })
		}
		cmd := exec.Command(filepath.Join(binDir, "kiln"), "submit", "-f", "-", "--queue", "team", "--dry-run")
		cmd.Env = append(os.Environ(), clientconfig.EnvConfig+"="+kilnConfig)
		cmd.Stdin = strings.NewReader(manifest)
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("kueue.x-k8s.io/queue-name: team"))
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "from-stdin"}, &trainer.TrainJob{})).NotTo(Succeed(), "a dry run stores nothing")

		cmd = exec.Command(filepath.Join(binDir, "kiln"), "submit", "-f", "-", "-o", "name")
		cmd.Env = append(os.Environ(), clientconfig.EnvConfig+"="+kilnConfig)
		cmd.Stdin = strings.NewReader(manifest)
		out, err = cmd.Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(Equal("from-stdin\n"))
	})

	It("says in one line what is wrong, with the documented exit codes", func() {
		_, errOut, code := kiln("submit", "--image", "x")
		Expect(code).To(Equal(2))
		Expect(errOut).To(Equal("kiln: name a runtime with --runtime (`kiln runtimes list`), or give a manifest with -f\n"))

		_, errOut, code = kiln("submit", "--runtime", "torch-distributed", "--name", "Bad_Name")
		Expect(code).To(Equal(1))
		Expect(errOut).To(HavePrefix("kiln: train_job.name: Invalid value: \"Bad_Name\""))
		Expect(strings.Count(errOut, "\n")).To(Equal(1))

		_, errOut, code = kiln("list", "-n", "kube-system")
		Expect(code).To(Equal(1))
		Expect(errOut).To(ContainSubstring("system:serviceaccount:ml:ada may not list trainjobs.trainer.kubeflow.org in namespace kube-system"))

		_, errOut, code = kiln("get", "nope")
		Expect(code).To(Equal(1))
		Expect(errOut).To(ContainSubstring(`"nope" not found`))

		_, errOut, code = kiln("list", "--server", "http://127.0.0.1:1")
		Expect(code).To(Equal(1))
		Expect(errOut).To(HavePrefix("kiln: cannot reach the Kiln API server at http://127.0.0.1:1"))
	})

	It("lists runtimes and shows the versions", func() {
		out, errOut, code := kiln("runtimes", "list")
		Expect(code).To(Equal(0), errOut)
		// Other specs of this envtest install the runtime catalog too.
		Expect(out).To(MatchRegexp(`(?m)^torch-distributed\tClusterTrainingRuntime\ttorch\t\d+\t`))
		out, _, code = kiln("version")
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("You are:    system:serviceaccount:ml:ada"))
		Expect(out).To(MatchRegexp(`Kueue:      (not )?installed`))
	})
})

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func yamlApply(ctx context.Context, doc string) error {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		return err
	}
	return k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("test"), client.ForceOwnership)
}
