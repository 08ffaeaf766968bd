package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	"github.com/kiln-ml/kiln/api/testing/pinned"
	"github.com/kiln-ml/kiln/runtimes"
)

// kilnOnly leaves JobSet and Kueue out of a render: the specs of Kiln's own objects.
var kilnOnly = []string{"jobset.install=false", "kueue.install=false"}

// helmTemplate renders charts/kiln as release "kiln" in namespace with the --set values
// (and --values=FILE ones).
func helmTemplate(namespace string, set ...string) ([]*unstructured.Unstructured, string, error) {
	root, err := pinned.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	return helmTemplateChart(filepath.Join(root, "charts", "kiln"), namespace, set...)
}

// helmTemplateChart is helmTemplate of the chart in directory chart.
func helmTemplateChart(chart, namespace string, set ...string) ([]*unstructured.Unstructured, string, error) {
	args := []string{"template", "kiln", chart, "--namespace", namespace, "--kube-version", "1.36.3", "--include-crds"}
	for _, s := range set {
		if strings.HasPrefix(s, "--values=") {
			args = append(args, s)
			continue
		}
		args = append(args, "--set", s)
	}
	out, err := exec.Command(filepath.Join(binDir, "helm"), args...).CombinedOutput()
	if err != nil {
		return nil, string(out), err
	}
	objs, err := kilntesting.DecodeManifests(out)
	return objs, string(out), err
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	GinkgoHelper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	Fail("no " + kind + " " + name + " in the rendered chart")
	return nil
}

func kinds(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func containerArgs(deploy *unstructured.Unstructured) []string {
	GinkgoHelper()
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	Expect(containers).To(HaveLen(1))
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args
}

var _ = Describe("The Helm chart", func() {
	It("renders with a bare `helm template`, which assumes the Kubernetes version helm was built for", func() {
		root, err := pinned.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.Command(filepath.Join(binDir, "helm"), "template", "kiln", filepath.Join(root, "charts", "kiln")).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(string(out)).To(ContainSubstring("kind: Deployment"))
		out, err = exec.Command(filepath.Join(binDir, "helm"), "version", "--short").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(string(out)).To(HavePrefix("v3."), "helm says its version")
	})

	It("has every object the install and observability docs name, by that name", func() {
		objs, out, err := helmTemplate("kiln-system", "defaultQueues.enabled=true", "monitoring.serviceMonitor.enabled=true",
			"monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true", "apiserver.podDisruptionBudget.enabled=true")
		Expect(err).NotTo(HaveOccurred(), out)
		names := map[string]bool{}
		for _, o := range objs {
			names[o.GetName()] = true
		}
		root, err := pinned.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		// Not objects of the chart: the namespace the docs install into, the images'
		// registry, the local platform's ClusterQueue.
		notObjects := map[string]bool{"kiln-system": true, "kiln-ml": true, "kiln-chart-default": true}
		name := regexp.MustCompile("`((?:kiln|<release>)-[a-z0-9-]+)(?:\\.<namespace>\\.svc)?`")
		checked := 0
		for _, doc := range []string{"install.md", "observability.md"} {
			data, err := os.ReadFile(filepath.Join(root, "docs", doc))
			Expect(err).NotTo(HaveOccurred())
			for _, m := range name.FindAllStringSubmatch(string(data), -1) {
				n := strings.Replace(m[1], "<release>", "kiln", 1) // the test's release is called kiln
				if notObjects[n] {
					continue
				}
				checked++
				Expect(names).To(HaveKey(n), "docs/%s names %s, which the chart does not create", doc, m[1])
			}
		}
		Expect(checked).To(BeNumerically(">", 10))
	})

	It("renders objects the apiserver accepts, in the release namespace, wired to each other", func(ctx context.Context) {
		objs, out, err := helmTemplate("ml-platform", kilnOnly...)
		Expect(err).NotTo(HaveOccurred(), out)

		By("every object passes the apiserver's validation (server-side apply, dry run: other specs may have created some)")
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				continue // envtest has them installed
			}
			if o.GetNamespace() != "" {
				ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": o.GetNamespace()}}}
				_ = k8s.Create(ctx, ns)
			}
			Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.DryRunAll,
				client.FieldOwner("kiln-chart-test"), client.ForceOwnership)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		}

		By("namespaced objects live in the release namespace, but where Kiln is, published in kube-public for every user")
		for _, o := range objs {
			if o.GetNamespace() == "kube-public" {
				Expect(o.GetName()).To(BeElementOf("kiln-info", "kiln-info-reader"), "%s %s", o.GetKind(), o.GetName())
				continue
			}
			switch o.GetKind() {
			case "Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "Secret", "Pod", "Job":
				Expect(o.GetNamespace()).To(Equal("ml-platform"), "%s %s", o.GetKind(), o.GetName())
			}
		}

		By("the webhook configurations are the ones the operator injects its CA into, pointed at its Service")
		svc := find(objs, "Service", "kiln-webhook")
		// The operator's constants name the same (operator/internal/webhook's tests check them).
		for kind, name := range map[string]string{
			"MutatingWebhookConfiguration":   "trainjob-defaulter.kiln.dev",
			"ValidatingWebhookConfiguration": "kiln-trainjob-validator",
		} {
			cfg := find(objs, kind, name)
			hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
			Expect(hooks).NotTo(BeEmpty())
			for _, h := range hooks {
				ref, _, _ := unstructured.NestedStringMap(h.(map[string]any), "clientConfig", "service")
				Expect(ref).To(HaveKeyWithValue("name", svc.GetName()))
				Expect(ref).To(HaveKeyWithValue("namespace", "ml-platform"))
			}
		}
		args := containerArgs(find(objs, "Deployment", "kiln-operator"))
		Expect(args).To(ContainElements("--webhook-service-name=kiln-webhook", "--webhook-namespace=ml-platform",
			"--webhook-secret-name=kiln-webhook-certs", "--cert-management=internal", "--leader-election-namespace=ml-platform"))
		find(objs, "Secret", "kiln-webhook-certs")

		By("RBAC: the bindings name the generated roles and the components' ServiceAccounts")
		for _, b := range append(kinds(objs, "ClusterRoleBinding"), kinds(objs, "RoleBinding")...) {
			if strings.HasSuffix(b.GetName(), "-test") || strings.HasSuffix(b.GetName(), "-crds") || b.GetName() == "kiln-info-reader" {
				continue
			}
			roleKind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
			roleName, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
			find(objs, roleKind, roleName)
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			sa := subjects[0].(map[string]any)
			find(objs, "ServiceAccount", sa["name"].(string))
		}

		By("kube-public/kiln-info: the API server's URLs, readable by every authenticated user")
		info, _, _ := unstructured.NestedStringMap(find(objs, "ConfigMap", "kiln-info").Object, "data")
		Expect(info).To(Equal(map[string]string{"apiServerURL": "", "apiServerInClusterURL": "http://kiln-apiserver.ml-platform.svc:8090"}))
		reader := find(objs, "RoleBinding", "kiln-info-reader")
		Expect(reader.Object["subjects"]).To(Equal([]any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}}))
		objs, out, err = helmTemplate("ml-platform", append(kilnOnly, "apiserver.ingress.enabled=true", "apiserver.ingress.hosts[0].host=kiln.example.com")...)
		Expect(err).NotTo(HaveOccurred(), out)
		info, _, _ = unstructured.NestedStringMap(find(objs, "ConfigMap", "kiln-info").Object, "data")
		Expect(info).To(HaveKeyWithValue("apiServerURL", "https://kiln.example.com"), "the Ingress' first host")

		By("every runtime of the catalog, and the CRDs from crds/")
		Expect(kinds(objs, "ClusterTrainingRuntime")).To(HaveLen(catalogSize()))
		Expect(kinds(objs, "CustomResourceDefinition")).To(HaveLen(5)) // TrainJob, the two runtimes, CronTrainJob, TrainJobMetrics
	})

	It("runs every container as the restricted Pod Security Standard asks", func() {
		objs, out, err := helmTemplate("kiln-system", "crds.upgrade=true", "defaultQueues.enabled=true")
		Expect(err).NotTo(HaveOccurred(), out)
		var specs []map[string]any
		for _, o := range objs {
			switch o.GetKind() {
			case "Deployment", "Job":
				spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
				specs = append(specs, spec)
			case "Pod":
				spec, _, _ := unstructured.NestedMap(o.Object, "spec")
				specs = append(specs, spec)
			}
		}
		// operator, API server, JobSet, Kueue, the CRD upgrade Job, the queue Jobs, the Kueue
		// roles Job, the release-pods Job, helm test
		Expect(specs).To(HaveLen(10))
		for _, spec := range specs {
			Expect(spec).To(HaveKeyWithValue("securityContext", HaveKeyWithValue("runAsNonRoot", true)))
			for _, c := range spec["containers"].([]any) {
				sc := c.(map[string]any)["securityContext"].(map[string]any)
				Expect(sc).To(HaveKeyWithValue("allowPrivilegeEscalation", false))
				Expect(sc).To(HaveKeyWithValue("readOnlyRootFilesystem", true))
				Expect(sc).To(HaveKeyWithValue("capabilities", HaveKeyWithValue("drop", ConsistOf("ALL"))))
			}
		}
	})

	It("takes images by tag or digest, pull secrets, scheduling, replicas with a PodDisruptionBudget", func() {
		digest := "sha256:" + strings.Repeat("ab", 32)
		objs, out, err := helmTemplate("kiln-system",
			"operator.image.registry=registry.example.com/mirror", "operator.image.digest="+digest,
			"apiserver.image.tag=v9", "imagePullSecrets[0].name=regcred",
			"operator.replicas=2", "operator.podDisruptionBudget.enabled=true",
			"operator.nodeSelector.pool=system", "operator.tolerations[0].key=dedicated", "operator.tolerations[0].operator=Exists")
		Expect(err).NotTo(HaveOccurred(), out)
		op := find(objs, "Deployment", "kiln-operator")
		spec, _, _ := unstructured.NestedMap(op.Object, "spec", "template", "spec")
		Expect(spec["containers"].([]any)[0]).To(HaveKeyWithValue("image", "registry.example.com/mirror/kiln-operator@"+digest))
		Expect(spec).To(HaveKeyWithValue("imagePullSecrets", ConsistOf(HaveKeyWithValue("name", "regcred"))))
		Expect(spec).To(HaveKeyWithValue("nodeSelector", HaveKeyWithValue("pool", "system")))
		Expect(spec).To(HaveKeyWithValue("tolerations", HaveLen(1)))
		Expect(op.Object["spec"]).To(HaveKeyWithValue("replicas", BeEquivalentTo(2)))
		find(objs, "PodDisruptionBudget", "kiln-operator")
		api := find(objs, "Deployment", "kiln-apiserver")
		containers, _, _ := unstructured.NestedSlice(api.Object, "spec", "template", "spec", "containers")
		Expect(containers[0]).To(HaveKeyWithValue("image", "ghcr.io/kiln-ml/kiln-apiserver:v9"))
		Expect(kinds(objs, "PodDisruptionBudget")).To(HaveLen(1), "the API server's only when asked")
		_, found, _ := unstructured.NestedSlice(api.Object, "spec", "template", "spec", "topologySpreadConstraints")
		Expect(found).To(BeFalse())

		By("spreading the API server's replicas, with a budget")
		objs, out, err = helmTemplate("kiln-system", "apiserver.replicas=3", "apiserver.podDisruptionBudget.enabled=true",
			"apiserver.podDisruptionBudget.minAvailable=2",
			"apiserver.topologySpreadConstraints[0].maxSkew=1", "apiserver.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
			"apiserver.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway")
		Expect(err).NotTo(HaveOccurred(), out)
		pdb := find(objs, "PodDisruptionBudget", "kiln-apiserver")
		Expect(pdb.Object["spec"]).To(HaveKeyWithValue("minAvailable", BeEquivalentTo(2)))
		selector, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
		Expect(selector).To(HaveKeyWithValue("app.kubernetes.io/component", "apiserver"))
		api = find(objs, "Deployment", "kiln-apiserver")
		spread, _, _ := unstructured.NestedSlice(api.Object, "spec", "template", "spec", "topologySpreadConstraints")
		Expect(spread).To(ConsistOf(And(
			HaveKeyWithValue("topologyKey", "topology.kubernetes.io/zone"),
			HaveKeyWithValue("labelSelector", HaveKeyWithValue("matchLabels", Equal(map[string]any{
				"app.kubernetes.io/name": "kiln", "app.kubernetes.io/instance": "kiln", "app.kubernetes.io/component": "apiserver",
			}))),
		)), "a constraint without a labelSelector selects the component's pods")
	})

	It("uses cert-manager when asked: a Certificate, CA injection, and the operator reading the files", func() {
		objs, out, err := helmTemplate("kiln-system", append([]string{"operator.webhook.certManagement=cert-manager"}, kilnOnly...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		cert := find(objs, "Certificate", "kiln-webhook")
		Expect(cert.Object["spec"]).To(HaveKeyWithValue("secretName", "kiln-webhook-certs"))
		find(objs, "Issuer", "kiln-webhook")
		for _, o := range append(kinds(objs, "MutatingWebhookConfiguration"), kinds(objs, "ValidatingWebhookConfiguration")...) {
			Expect(o.GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", "kiln-system/kiln-webhook"))
		}
		Expect(containerArgs(find(objs, "Deployment", "kiln-operator"))).To(ContainElement("--cert-management=files"))
		Expect(kinds(objs, "Secret")).To(BeEmpty(), "cert-manager owns the Secret")
	})

	It("turns runtimes, the API server and the users' roles off", func() {
		objs, out, err := helmTemplate("kiln-system", "runtimes.mpi-distributed.enabled=false", "apiserver.enabled=false", "userRoles.create=false")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(kinds(objs, "ClusterTrainingRuntime")).To(HaveLen(catalogSize() - 1))
		for _, o := range objs {
			Expect(o.GetName()).NotTo(Or(Equal("mpi-distributed"), Equal("kiln-apiserver"), Equal("kiln-user")), "%s %s", o.GetKind(), o.GetName())
		}
	})

	It("installs JobSet and Kueue from their own charts, wired to Kiln in any namespace", func(ctx context.Context) {
		objs, out, err := helmTemplate("ml-platform")
		Expect(err).NotTo(HaveOccurred(), out)
		jobset := find(objs, "Deployment", "kiln-jobset-controller")
		kueue := find(objs, "Deployment", "kiln-kueue-controller-manager")
		for d, image := range map[*unstructured.Unstructured]string{jobset: "registry.k8s.io/jobset/jobset:v", kueue: "registry.k8s.io/kueue/kueue:v"} {
			Expect(d.GetNamespace()).To(Equal("ml-platform"))
			containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			Expect(containers[0]).To(HaveKeyWithValue("image", HavePrefix(image)), "upstream's released image, not a staging tag")
		}

		By("Kueue's integrations: TrainJob, JobSet and batch Jobs")
		cm := find(objs, "ConfigMap", "kiln-kueue-manager-config")
		cfgText, _, _ := unstructured.NestedString(cm.Object, "data", "controller_manager_config.yaml")
		var kueueCfg struct {
			Integrations struct{ Frameworks []string } `json:"integrations"`
		}
		Expect(yaml.Unmarshal([]byte(cfgText), &kueueCfg)).To(Succeed())
		Expect(kueueCfg.Integrations.Frameworks).To(ConsistOf("trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset", "batch/job"))

		By("the operator keeps Kiln's fields on the updates of this release's Kueue controller")
		sa, _, _ := unstructured.NestedString(kueue.Object, "spec", "template", "spec", "serviceAccountName")
		Expect(containerArgs(find(objs, "Deployment", "kiln-operator"))).To(ContainElement(
			ContainSubstring("system:serviceaccount:ml-platform:" + sa)))

		By("every webhook of JobSet and Kueue is reached through a Service of the release namespace")
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			for _, cfg := range kinds(objs, kind) {
				hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
				for _, h := range hooks {
					ref, _, _ := unstructured.NestedStringMap(h.(map[string]any), "clientConfig", "service")
					Expect(ref).To(HaveKeyWithValue("namespace", "ml-platform"), "%s %s", kind, cfg.GetName())
					find(objs, "Service", ref["name"])
				}
			}
		}

		By("Kueue's CRDs, templates of its chart, are kept on uninstall like Kiln's")
		kueueCRDs := 0
		for _, crd := range kinds(objs, "CustomResourceDefinition") {
			if strings.HasSuffix(crd.GetName(), ".kueue.x-k8s.io") {
				kueueCRDs++
				Expect(crd.GetAnnotations()).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"), crd.GetName())
			}
		}
		Expect(kueueCRDs).To(BeNumerically(">=", 10))
		find(objs, "CustomResourceDefinition", "jobsets.jobset.x-k8s.io")

		By("the API server is not ready before this release's Kueue serves its API")
		Expect(containerArgs(find(objs, "Deployment", "kiln-apiserver"))).To(ContainElement("--kueue=required"))

		By("install: false leaves each out")
		objs, out, err = helmTemplate("ml-platform", kilnOnly...)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(kinds(objs, "Deployment")).To(HaveLen(2))
		Expect(containerArgs(find(objs, "Deployment", "kiln-apiserver"))).NotTo(ContainElement(HavePrefix("--kueue")),
			"Kueue's queues are served where Kueue is installed, and looked for where it is not")
		Expect(containerArgs(find(objs, "Deployment", "kiln-operator"))).To(ContainElement(
			"--preserve-fields-for=system:serviceaccount:kueue-system:kueue-controller-manager"))
	})

	It("removes the aggregationRule of Kueue's aggregated ClusterRoles before uninstall, both in one argument", func() {
		objs, out, err := helmTemplate("kiln-system")
		Expect(err).NotTo(HaveOccurred(), out)
		job := find(objs, "Job", "kiln-kueue-roles")
		Expect(job.GetAnnotations()).To(HaveKeyWithValue("helm.sh/hook", "pre-delete"))
		Expect(containerArgs(job)).To(Equal([]string{"--disaggregate-clusterroles=kiln-kueue-batch-admin-role,kiln-kueue-batch-user-role"}))
		for _, name := range []string{"kiln-kueue-batch-admin-role", "kiln-kueue-batch-user-role"} {
			Expect(find(objs, "ClusterRole", name).Object).To(HaveKey("aggregationRule"), "the roles the hook names are Kueue's aggregated ones")
		}
	})

	It("creates the default queues by hooks, once Kueue serves them, and deletes them before uninstall", func(ctx context.Context) {
		objs, out, err := helmTemplate("kiln-system", "defaultQueues.enabled=true", "defaultQueues.localQueue.namespaces={team-a,team-b}",
			"defaultQueues.clusterQueue.resources.cpu=16")
		Expect(err).NotTo(HaveOccurred(), out)
		apply := find(objs, "Job", "kiln-queues-apply")
		Expect(apply.GetAnnotations()).To(HaveKeyWithValue("helm.sh/hook", "post-install,post-upgrade"))
		Expect(containerArgs(apply)).To(Equal([]string{"--apply-manifests=/etc/kiln/queues/queues.yaml"}))
		del := find(objs, "Job", "kiln-queues-delete")
		Expect(del.GetAnnotations()).To(HaveKeyWithValue("helm.sh/hook", "pre-delete"))
		cm := find(objs, "ConfigMap", "kiln-queues")
		Expect(cm.GetAnnotations()).To(HaveKeyWithValue("helm.sh/hook", ContainSubstring("pre-delete")))
		data, _, _ := unstructured.NestedString(cm.Object, "data", "queues.yaml")
		queues, err := kilntesting.DecodeManifests([]byte(data))
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, q := range queues {
			names = append(names, q.GetKind()+" "+q.GetNamespace()+"/"+q.GetName())
		}
		Expect(names).To(Equal([]string{"ResourceFlavor /default-flavor", "ClusterQueue /cluster-queue", "LocalQueue team-a/user-queue", "LocalQueue team-b/user-queue",
			"Namespace /team-a", "Namespace /team-b"}))
		quota, _, _ := unstructured.NestedSlice(queues[1].Object, "spec", "resourceGroups")
		Expect(quota[0]).To(HaveKeyWithValue("coveredResources", ConsistOf("cpu", "memory", "nvidia.com/gpu")))
		Expect(fmt.Sprint(quota[0])).To(ContainSubstring("nominalQuota:16"))
		Expect(queues[4].GetLabels()).To(Equal(map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest"}),
			"Pod Security's baseline on the namespaces the queues serve, by default")
		Expect(fmt.Sprint(find(objs, "ClusterRole", "kiln-queues").Object["rules"])).To(ContainSubstring("namespaces"))

		By("restricted, or nothing")
		objs, out, err = helmTemplate("kiln-system", "defaultQueues.enabled=true", "defaultQueues.localQueue.podSecurity=restricted")
		Expect(err).NotTo(HaveOccurred(), out)
		data, _, _ = unstructured.NestedString(find(objs, "ConfigMap", "kiln-queues").Object, "data", "queues.yaml")
		Expect(data).To(ContainSubstring("pod-security.kubernetes.io/enforce: restricted"))
		objs, out, err = helmTemplate("kiln-system", "defaultQueues.enabled=true", "defaultQueues.localQueue.podSecurity=")
		Expect(err).NotTo(HaveOccurred(), out)
		data, _, _ = unstructured.NestedString(find(objs, "ConfigMap", "kiln-queues").Object, "data", "queues.yaml")
		Expect(data).NotTo(ContainSubstring("kind: Namespace"))
		Expect(fmt.Sprint(find(objs, "ClusterRole", "kiln-queues").Object["rules"])).NotTo(ContainSubstring("namespaces"))
	})

	It("makes a MultiKueue manager dispatch its default queues to the workers it names", func() {
		objs, out, err := helmTemplate("kiln-system", append(kilnOnly, "multiCluster.role=manager", "defaultQueues.enabled=true",
			"multiCluster.workers[0].name=gpu-east", "multiCluster.workers[0].kubeconfigSecret=gpu-east-kubeconfig",
			"multiCluster.workers[1].name=gpu-west", "multiCluster.workers[1].kubeconfigSecret=gpu-west-kubeconfig")...)
		Expect(err).NotTo(HaveOccurred(), out)
		data, _, _ := unstructured.NestedString(find(objs, "ConfigMap", "kiln-queues").Object, "data", "queues.yaml")
		queues, err := kilntesting.DecodeManifests([]byte(data))
		Expect(err).NotTo(HaveOccurred())
		checks, _, _ := unstructured.NestedSlice(find(queues, "ClusterQueue", "cluster-queue").Object, "spec", "admissionChecksStrategy", "admissionChecks")
		Expect(checks).To(Equal([]any{map[string]any{"name": "cluster-queue-multikueue"}}))
		Expect(find(queues, "AdmissionCheck", "cluster-queue-multikueue").Object["spec"]).To(HaveKeyWithValue("controllerName", "kueue.x-k8s.io/multikueue"))
		clusters, _, _ := unstructured.NestedStringSlice(find(queues, "MultiKueueConfig", "cluster-queue-multikueue").Object, "spec", "clusters")
		Expect(clusters).To(Equal([]string{"gpu-east", "gpu-west"}))
		secret, _, _ := unstructured.NestedString(find(queues, "MultiKueueCluster", "gpu-west").Object, "spec", "clusterSource", "kubeConfig", "location")
		Expect(secret).To(Equal("gpu-west-kubeconfig"))
		Expect(fmt.Sprint(find(objs, "ClusterRole", "kiln-queues").Object["rules"])).To(ContainSubstring("multikueueclusters"))
	})

	It("lets a MultiKueue manager act on a worker as one ServiceAccount, with what MultiKueue does there", func() {
		objs, out, err := helmTemplate("kiln-system", append(kilnOnly, "multiCluster.role=worker")...)
		Expect(err).NotTo(HaveOccurred(), out)
		token := find(objs, "Secret", "multikueue-token")
		Expect(token.Object).To(HaveKeyWithValue("type", "kubernetes.io/service-account-token"))
		Expect(token.GetAnnotations()).To(HaveKeyWithValue("kubernetes.io/service-account.name", "multikueue"))
		find(objs, "ServiceAccount", "multikueue")
		rules := fmt.Sprint(find(objs, "ClusterRole", "kiln-multikueue-worker").Object["rules"])
		Expect(rules).To(And(ContainSubstring("resources:[workloads] verbs:[get list watch create update patch delete]"), ContainSubstring("trainjobs"), ContainSubstring("jobsets")))
		subjects, _, _ := unstructured.NestedSlice(find(objs, "ClusterRoleBinding", "kiln-multikueue-worker").Object, "subjects")
		Expect(subjects).To(ConsistOf(HaveKeyWithValue("name", "multikueue")))
		for _, o := range objs {
			Expect(o.GetKind()).NotTo(Equal("MultiKueueCluster"))
		}
	})

	It("renders the values of a release from before multiCluster, as `helm upgrade --reuse-values` passes them", func() {
		_, out, err := helmTemplate("kiln-system", "multiCluster=null", "defaultQueues.enabled=true")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("renders an upgrade from the previous release with `helm upgrade --reuse-values`: every flag has a value", func() {
		// --reuse-values renders the new templates with the values of the chart the release was
		// installed from (helm's pkg/action reuseValues), so a key added since is absent, not
		// defaulted: the chart with the previous release's values.yaml in place of its own is
		// what such an upgrade renders.
		commit := os.Getenv("KILN_UPGRADE_FROM_COMMIT")
		Expect(commit).NotTo(BeEmpty(), "KILN_UPGRADE_FROM_COMMIT names the previous release's commit (make test-integration sets it from UPGRADE_FROM_COMMIT)")
		root, err := pinned.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		previous, err := exec.Command("git", "-C", root, "show", commit+":charts/kiln/values.yaml").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "the previous release's values (a clone without that commit needs git fetch --unshallow): %s", previous)
		chart := filepath.Join(GinkgoT().TempDir(), "kiln")
		Expect(os.CopyFS(chart, os.DirFS(filepath.Join(root, "charts", "kiln")))).To(Succeed())
		Expect(os.WriteFile(filepath.Join(chart, "values.yaml"), previous, 0o644)).To(Succeed())
		for _, set := range [][]string{nil, {"defaultQueues.enabled=true"}} {
			objs, out, err := helmTemplateChart(chart, "kiln-system", set...)
			Expect(err).NotTo(HaveOccurred(), "%v: %s", set, out)
			Expect(out).NotTo(ContainSubstring("<no value>"), "%v", set)
			deployments := kinds(objs, "Deployment")
			Expect(deployments).NotTo(BeEmpty())
			for _, d := range deployments {
				containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
				for _, c := range containers {
					args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
					for _, a := range args {
						Expect(a).NotTo(MatchRegexp(`^--[a-z0-9-]+=$`), "%v: %s's flag has no value, so the binary refuses to start", set, d.GetName())
					}
				}
			}
			// The operator's flags added since are left to the binary's defaults.
			Expect(containerArgs(find(objs, "Deployment", "kiln-operator"))).NotTo(ContainElement(HavePrefix("--kube-api-protocol")))
		}
	})

	It("refuses a MultiKueue setup that cannot work, saying what to set", func() {
		for set, want := range map[string][]string{
			"a manager without workers":        {"multiCluster.role=manager", "defaultQueues.enabled=true"},
			"a manager without default queues": {"multiCluster.role=manager", "multiCluster.workers[0].name=w", "multiCluster.workers[0].kubeconfigSecret=w"},
			"workers of no manager":            {"multiCluster.workers[0].name=w", "multiCluster.workers[0].kubeconfigSecret=w"},
			"an unknown role":                  {"multiCluster.role=boss"},
		} {
			_, out, err := helmTemplate("kiln-system", append(kilnOnly, want...)...)
			Expect(err).To(HaveOccurred(), set)
			Expect(out).To(ContainSubstring("multiCluster"), set)
		}
	})

	It("adds the ServiceMonitor, PrometheusRule, dashboard and tracing when asked, and none by default", func() {
		objs, out, err := helmTemplate("kiln-system", kilnOnly...)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(kinds(objs, "ServiceMonitor")).To(BeEmpty())
		Expect(kinds(objs, "PrometheusRule")).To(BeEmpty())
		Expect(out).NotTo(ContainSubstring("OTEL_"))
		Expect(containerArgs(find(objs, "Deployment", "kiln-operator"))).To(ContainElement("--metrics-secure=true"))
		Expect(find(objs, "ClusterRole", "kiln-metrics-reader").Object["rules"]).To(Equal([]any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}))

		objs, out, err = helmTemplate("kiln-system", append([]string{"monitoring.serviceMonitor.enabled=true", "monitoring.serviceMonitor.labels.release=prometheus",
			"monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true", "monitoring.dashboard.namespace=grafana",
			"monitoring.tracing.otlpEndpoint=http://otel-collector.monitoring:4318", "monitoring.tracing.env.OTEL_TRACES_SAMPLER=parentbased_always_on"}, kilnOnly...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		sm := find(objs, "ServiceMonitor", "kiln")
		Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prometheus"))
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		Expect(endpoints).To(HaveLen(2), "the operator's and the API server's")
		Expect(endpoints[0]).To(HaveKeyWithValue("scheme", "https"))
		Expect(endpoints[0]).To(HaveKeyWithValue("port", "metrics"))
		Expect(find(objs, "Service", "kiln-operator-metrics").GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/component", "operator"), "the ServiceMonitor selects it")
		By("sending the token of a ServiceAccount allowed to get /metrics, from a Secret (authorization, not bearerTokenFile)")
		for _, e := range endpoints {
			Expect(e).NotTo(HaveKey("bearerTokenFile"))
			Expect(e).To(HaveKeyWithValue("authorization", map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "kiln-metrics-scraper", "key": "token"}}))
		}
		secret := find(objs, "Secret", "kiln-metrics-scraper")
		Expect(secret.Object["type"]).To(Equal("kubernetes.io/service-account-token"))
		Expect(secret.GetAnnotations()).To(HaveKeyWithValue("kubernetes.io/service-account.name", "kiln-metrics-scraper"))
		find(objs, "ServiceAccount", "kiln-metrics-scraper")
		binding := find(objs, "ClusterRoleBinding", "kiln-metrics-scraper")
		Expect(binding.Object["roleRef"]).To(HaveKeyWithValue("name", "kiln-metrics-reader"))

		groups, _, _ := unstructured.NestedSlice(find(objs, "PrometheusRule", "kiln").Object, "spec", "groups")
		rules, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
		var alerts []string
		for _, r := range rules {
			alerts = append(alerts, r.(map[string]any)["alert"].(string))
			expr := r.(map[string]any)["expr"].(string)
			// Kueue's trainjob reconciler has the same controller label: every selector is this
			// release's operator's scrape job's.
			for _, selector := range regexp.MustCompile(`\b(?:kiln|controller_runtime|up)[a-z_]*\{[^}]*\}`).FindAllString(expr, -1) {
				Expect(selector).To(ContainSubstring(`job="kiln-operator-metrics",namespace="kiln-system"`), expr)
			}
			Expect(expr).NotTo(MatchRegexp(`\b(?:kiln|controller_runtime)_[a-z_]*\[`), "a metric without a selector: %s", expr)
		}
		Expect(alerts).To(ConsistOf("KilnTimerLagHigh", "KilnReconcileErrors", "KilnJobSetWritesFailing", "KilnJobsStuckQueued", "KilnOperatorDown"))

		cm := find(objs, "ConfigMap", "kiln-dashboard")
		Expect(cm.GetNamespace()).To(Equal("grafana"))
		Expect(cm.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))
		dashboard := map[string]any{}
		Expect(json.Unmarshal([]byte(cm.Object["data"].(map[string]any)["kiln.json"].(string)), &dashboard)).To(Succeed(), "the dashboard is JSON")
		Expect(dashboard["title"]).To(Equal("Kiln"))
		Expect(dashboard["panels"]).NotTo(BeEmpty())
		raw := cm.Object["data"].(map[string]any)["kiln.json"].(string)
		exprs := regexp.MustCompile(`"expr": "((?:[^"\\]|\\.)*)"`).FindAllStringSubmatch(raw, -1)
		Expect(exprs).NotTo(BeEmpty())
		for _, e := range exprs {
			for _, m := range regexp.MustCompile(`\b(?:kiln|controller_runtime|workqueue)_[a-z_]*(\{[^}]*\})?`).FindAllStringSubmatch(e[1], -1) {
				Expect(m[1]).To(HavePrefix(`{namespace=~\"$namespace\",job=~\"$job\"`), "the dashboard's %s keeps to Kiln's scrape jobs", m[0])
			}
		}
		Expect(raw).To(ContainSubstring(`label_values(kiln_build_info{namespace=~\"$namespace\"}, job)`))

		for _, name := range []string{"kiln-operator", "kiln-apiserver"} {
			containers, _, _ := unstructured.NestedSlice(find(objs, "Deployment", name).Object, "spec", "template", "spec", "containers")
			Expect(containers[0].(map[string]any)["env"]).To(ContainElements(
				map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.monitoring:4318"},
				map[string]any{"name": "OTEL_TRACES_SAMPLER", "value": "parentbased_always_on"}), name)
		}

		By("taking the token from the admin's Secret instead")
		objs, out, err = helmTemplate("kiln-system", append([]string{"monitoring.serviceMonitor.enabled=true",
			"monitoring.serviceMonitor.authorization.secretName=prometheus-token", "monitoring.serviceMonitor.authorization.key=bearer"}, kilnOnly...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		endpoints, _, _ = unstructured.NestedSlice(find(objs, "ServiceMonitor", "kiln").Object, "spec", "endpoints")
		Expect(endpoints[0]).To(HaveKeyWithValue("authorization", HaveKeyWithValue("credentials", map[string]any{"name": "prometheus-token", "key": "bearer"})))
		Expect(kinds(objs, "Secret")).NotTo(ContainElement(WithTransform(func(o *unstructured.Unstructured) string { return o.GetName() }, Equal("kiln-metrics-scraper"))))

		_, out, err = helmTemplate("kiln-system", append([]string{"monitoring.serviceMonitor.enabled=true", "operator.metrics.enabled=false"}, kilnOnly...)...)
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("monitoring.serviceMonitor.enabled needs operator.metrics.enabled"))
	})

	It("refuses misspelt keys and wrong types, naming the key", func() {
		for set, want := range map[string]string{
			"jobset.enabled=false":                           "additional properties 'enabled' not allowed",
			"kueue.install=maybe":                            "/kueue/install",
			"defaultQueues.clusterQueue.resources.cpu=lots":  "/defaultQueues/clusterQueue/resources/cpu",
			"defaultQueues.localQueue.namespaces={Team_A}":   "/defaultQueues/localQueue/namespaces/0",
			"defaultQueues.localQueue.podSecurity=strict":    "/defaultQueues/localQueue/podSecurity",
			"apiserver.url=kiln.example.com":                 "/apiserver/url",
			"operater.replicas=2":                            "additional properties 'operater' not allowed",
			"operator.replicas=two":                          "/operator/replicas",
			"operator.webhook.port=0":                        "/operator/webhook/port",
			"runtimes.torch.enabled=false":                   "additional properties 'torch' not allowed",
			"operator.image.digest=latest":                   "/operator/image/digest",
			"apiserver.extraArgs[0]=verbose":                 "/apiserver/extraArgs/0",
			"monitoring.tracing.otlpEndpoint=collector:4318": "/monitoring/tracing/otlpEndpoint",
			"monitoring.serviceMonitor.interval=often":       "/monitoring/serviceMonitor/interval",
		} {
			_, out, err := helmTemplate("kiln-system", set)
			Expect(err).To(HaveOccurred(), set)
			Expect(out).To(ContainSubstring(want), set)
		}
	})
})

// catalogSize is the number of runtimes in Kiln's catalog.
func catalogSize() int {
	GinkgoHelper()
	rts, err := runtimes.ClusterTrainingRuntimes()
	Expect(err).NotTo(HaveOccurred())
	return len(rts)
}
