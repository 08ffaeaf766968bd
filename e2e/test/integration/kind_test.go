package integration

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/api/testing/pinned"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// kindDir is e2e/kind, in this clone.
func kindDir() string {
	GinkgoHelper()
	root, err := pinned.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	return filepath.Join(root, "e2e", "kind")
}

// e2e/kind runs only on a host with Docker and an NVIDIA GPU; here its rendered
// configurations are checked (its script by shellcheck, in make verify).
var _ = Describe("The kind + NVIDIA GPU e2e configuration (e2e/kind)", func() {
	var dir string
	BeforeEach(func() { dir = kindDir() })

	It("renders a kind cluster whose workers get the host's GPUs through the NVIDIA runtime", func() {
		text, err := os.ReadFile(filepath.Join(dir, "nvkind-config.yaml.tmpl"))
		Expect(err).NotTo(HaveOccurred())
		tmpl, err := template.New("nvkind").Option("missingkey=error").Parse(string(text))
		Expect(err).NotTo(HaveOccurred())
		var values map[string]any
		data, err := os.ReadFile(filepath.Join(dir, "nvkind-values.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.Unmarshal(data, &values)).To(Succeed())

		for name, vals := range map[string]map[string]any{
			"the committed values": values,
			"two workers, two GPUs each, a node image": {"name": "x", "image": "kindest/node:v1.36.0",
				"workers": []any{map[string]any{"devices": []any{0, 1}}, map[string]any{"devices": []any{2, 3}}}},
		} {
			var out bytes.Buffer
			Expect(tmpl.Execute(&out, vals)).To(Succeed(), name)
			cluster := kindv1alpha4.Cluster{}
			Expect(yaml.UnmarshalStrict(out.Bytes(), &cluster)).To(Succeed(), "%s:\n%s", name, out.String())
			Expect(cluster.Kind).To(Equal("Cluster"))
			Expect(cluster.APIVersion).To(Equal("kind.x-k8s.io/v1alpha4"))
			Expect(cluster.Nodes[0].Role).To(Equal(kindv1alpha4.ControlPlaneRole))
			workers := cluster.Nodes[1:]
			Expect(workers).To(HaveLen(len(vals["workers"].([]any))), name)
			for i, w := range workers {
				Expect(w.Role).To(Equal(kindv1alpha4.WorkerRole))
				Expect(w.Image).To(Equal(vals["image"]))
				devices := vals["workers"].([]any)[i].(map[string]any)["devices"].([]any)
				Expect(w.ExtraMounts).To(HaveLen(len(devices)))
				for _, m := range w.ExtraMounts {
					Expect(m.HostPath).To(Equal("/dev/null"))
					Expect(m.ContainerPath).To(HavePrefix("/var/run/nvidia-container-devices/cdi/runtime.nvidia.com/gpu/"))
				}
			}
		}
	})

	It("installs the chart with its values, and submits a GPU TrainJob the apiserver accepts", func(ctx context.Context) {
		objs, out, err := helmTemplate("kiln-system", "operator.image.tag=v1", "apiserver.image.tag=v1", "tests.image.tag=v1",
			"--values="+filepath.Join(dir, "values.yaml"))
		Expect(err).NotTo(HaveOccurred(), out)
		op := find(objs, "Deployment", "kiln-operator")
		containers, _, _ := unstructured.NestedSlice(op.Object, "spec", "template", "spec", "containers")
		Expect(containers[0]).To(HaveKeyWithValue("image", "kiln.local/kiln-operator:v1"))
		Expect(containers[0]).To(HaveKeyWithValue("imagePullPolicy", "Never"))
		find(objs, "Job", "kiln-queues-apply")

		jobs, err := kilntesting.ReadManifests(filepath.Join(dir, "gpu-trainjob.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(jobs).To(HaveLen(1))
		Expect(k8s.Create(ctx, jobs[0], client.DryRunAll)).To(Succeed())
		tj := &trainer.TrainJob{}
		Expect(k8s.Scheme().Convert(jobs[0], tj, nil)).To(Succeed())
		Expect(tj.Spec.Trainer.ResourcesPerNode.Limits).To(HaveKey(BeEquivalentTo("nvidia.com/gpu")))
		Expect(tj.Labels).To(HaveKeyWithValue("kueue.x-k8s.io/queue-name", "user-queue"), "the LocalQueue values.yaml creates")
	})
})

// e2e/kind/local.sh runs on this machine (make test-kind, outside make test); its
// configurations are checked here on every make test.
var _ = Describe("The offline kind configuration of this machine (e2e/kind/local.sh)", func() {
	var dir string
	BeforeEach(func() { dir = kindDir() })

	It("makes one node with the bridge CNI, subnets in 100.64.0.0/10 and a kubelet on cgroup v1", func() {
		text, err := os.ReadFile(filepath.Join(dir, "local-cluster.yaml"))
		Expect(err).NotTo(HaveOccurred())
		script, err := os.ReadFile(filepath.Join(dir, "local.sh"))
		Expect(err).NotTo(HaveOccurred())
		subnet := func(name string) string {
			m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindSubmatch(script)
			Expect(m).NotTo(BeNil(), name)
			return string(m[1])
		}
		rendered := strings.NewReplacer("@POD_SUBNET@", subnet("pod_subnet"), "@SERVICE_SUBNET@", subnet("service_subnet")).Replace(string(text))
		cluster := kindv1alpha4.Cluster{}
		Expect(yaml.UnmarshalStrict([]byte(rendered), &cluster)).To(Succeed(), rendered)
		Expect(cluster.Nodes).To(HaveLen(1))
		Expect(cluster.Networking.DisableDefaultCNI).To(BeTrue())
		_, shared, _ := net.ParseCIDR("100.64.0.0/10")
		for _, name := range []string{"docker_bip", "docker_pool", "kind_subnet", "pod_subnet", "service_subnet"} {
			ip, _, err := net.ParseCIDR(subnet(name))
			Expect(err).NotTo(HaveOccurred(), name)
			Expect(shared.Contains(ip)).To(BeTrue(), "%s %s is outside 100.64.0.0/10", name, subnet(name))
		}
		Expect(cluster.KubeadmConfigPatches).To(ContainElement(ContainSubstring("failCgroupV1: false")))
	})

	It("installs the chart from the loaded images only, with small requests for JobSet and Kueue", func() {
		objs, out, err := helmTemplate("kiln-system", "operator.image.tag=v1", "apiserver.image.tag=v1", "tests.image.tag=v1",
			"--values="+filepath.Join(dir, "local-values.yaml"))
		Expect(err).NotTo(HaveOccurred(), out)
		var deployments []string
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			deployments = append(deployments, o.GetName())
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				c := c.(map[string]any)
				Expect(c["image"]).To(HavePrefix("kiln.local/"), "%s: nothing is pulled", o.GetName())
				Expect(c["imagePullPolicy"]).To(Equal("Never"), o.GetName())
				if strings.Contains(o.GetName(), "jobset") || strings.Contains(o.GetName(), "kueue") {
					cpu, _, _ := unstructured.NestedString(c, "resources", "requests", "cpu")
					Expect(cpu).To(Equal("50m"), "%s requests little of the node's two CPUs", o.GetName())
				}
			}
		}
		Expect(deployments).To(ContainElements(ContainSubstring("jobset"), ContainSubstring("kueue"), "kiln-operator", "kiln-apiserver"))
		find(objs, "Job", "kiln-queues-apply")
		// helm test's TrainJob runs a loaded image too.
		test, _ := yaml.Marshal(find(objs, "Pod", "kiln-test").Object)
		Expect(string(test)).To(ContainSubstring("--image=kiln.local/torch-cpu:1.13"))
	})
})
