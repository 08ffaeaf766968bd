package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// The chart's own promises, on the install `make test-e2e KILN_INSTALL=chart` made. The
// rest of the suite runs against that install too.
var _ = Describe("the Helm chart's install", Label(chartMode), Serial, Ordered, func() {
	var p *platform.Platform
	helm := func(ctx context.Context, args ...string) string {
		GinkgoHelper()
		out, err := p.Helm(ctx, args...)
		Expect(err).NotTo(HaveOccurred(), out)
		return out
	}

	BeforeAll(func() {
		if os.Getenv(platform.EnvInstall) != string(platform.InstallChart) || os.Getenv("KILN_ROOT") == "" {
			Skip("Kiln was not installed by its chart on the local platform (make test-e2e KILN_INSTALL=chart)")
		}
		cfg := platform.DefaultConfig(os.Getenv("KILN_ROOT"))
		cfg.Install = platform.InstallChart
		p = &platform.Platform{Config: cfg, Out: GinkgoWriter}
	})

	It("passes `helm test`: a TrainJob submitted with the kiln CLI through the API server completes", func(ctx context.Context) {
		out := helm(ctx, "test", platform.ReleaseName, "-n", platform.APIServerNamespace, "--timeout", "3m", "--hide-notes")
		Expect(strings.Count(out, "Phase:          Succeeded")).To(Equal(3), out)
	})

	It("runs JobSet and Kueue from their own charts as pods, every image pulled from the platform's registry, and creates its default queues once Kueue serves them", func(ctx context.Context) {
		registry := p.RegistryHost()
		for name, image := range map[string]string{
			platform.ReleaseName + "-jobset-controller":        registry + "/jobset/jobset:",
			platform.ReleaseName + "-kueue-controller-manager": registry + "/kueue/kueue:",
			platform.ReleaseName + "-operator":                 registry + "/kiln/kiln-operator:",
			platform.ReleaseName + "-apiserver":                registry + "/kiln/kiln-apiserver:",
		} {
			deploy := &appsv1.Deployment{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: platform.APIServerNamespace, Name: name}, deploy)).To(Succeed())
			Expect(deploy.Status.ReadyReplicas).To(BeNumerically(">=", 1), name)
			Expect(deploy.Spec.Template.Spec.Containers[0].Image).To(HavePrefix(image), name)
			pods := &corev1.PodList{}
			Expect(k8s.List(ctx, pods, client.InNamespace(platform.APIServerNamespace), client.MatchingLabels(deploy.Spec.Selector.MatchLabels))).To(Succeed())
			Expect(pods.Items).NotTo(BeEmpty())
			for _, pod := range pods.Items {
				Expect(pod.Spec.NodeName).To(Equal(platform.RealNodeName), "pod %s", pod.Name)
				// The kubelet names the image by the digest it pulled, from where it pulled it:
				// nothing was imported into containerd by hand.
				Expect(pod.Status.ContainerStatuses).NotTo(BeEmpty())
				Expect(pod.Status.ContainerStatuses[0].ImageID).To(HavePrefix(strings.TrimSuffix(image, ":")+"@sha256:"), "pod %s", pod.Name)
			}
		}
		By("the registry holds what the chart runs, over HTTPS its CA signed")
		registryClient, err := p.RegistryClient()
		Expect(err).NotTo(HaveOccurred())
		resp, err := registryClient.Get("https://" + registry + "/v2/_catalog")
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		var catalog struct{ Repositories []string }
		Expect(json.NewDecoder(resp.Body).Decode(&catalog)).To(Succeed())
		Expect(catalog.Repositories).To(ContainElements("charts/kiln", "kiln/kiln-operator", "kiln/kiln-apiserver", "kiln/kiln", "jobset/jobset", "kueue/kueue"))
		By("the chart's queues, created by its post-install hook after Kueue's CRDs, active")
		for _, obj := range []struct{ kind, ns string }{{"ResourceFlavor", ""}, {"ClusterQueue", ""}, {"LocalQueue", platform.DefaultNamespace}} {
			u := kueueObject(obj.kind, obj.ns, platform.ChartQueue)
			Eventually(ctx, func(g Gomega) {
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
				if obj.kind != "ResourceFlavor" {
					g.Expect(conditionStatus(u, "Active")).To(Equal("True"))
				}
			}).Should(Succeed(), "%s %s", obj.kind, platform.ChartQueue)
		}
		By("the hook's ServiceAccount and RBAC are gone once it succeeded")
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: platform.APIServerNamespace, Name: platform.ReleaseName + "-queues"}, &corev1.ServiceAccount{}))).To(BeTrue())
	})

	It("keeps admission working throughout `helm upgrade` with changed values, and upgrades the CRDs first", func(ctx context.Context) {
		ns := newNamespace(ctx, "chart-upgrade")
		var attempts, failures atomic.Int32
		var firstFailure atomic.Value
		stop := make(chan struct{})
		var wg sync.WaitGroup
		// Four callers back to back keep several of the apiserver's connections to the webhook
		// busy, so that a replica that stopped with one of them still open fails an admission
		// (one per replica stopped, before the operator drained on SIGTERM; see docs/install.md).
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer GinkgoRecover()
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					tj := torchJob(ns, "probe", 1).Obj()
					attempts.Add(1)
					// Server-side dry run: the TrainJob goes through both webhooks and is not stored.
					if err := k8s.Create(ctx, tj, client.DryRunAll); err != nil {
						failures.Add(1)
						firstFailure.CompareAndSwap(nil, err.Error())
					}
				}
			}()
		}
		// A new log level changes the operator's pod template: a rolling update, from one
		// replica to two (hot standby) with a PodDisruptionBudget.
		helm(ctx, "upgrade", platform.ReleaseName, p.Root+"/charts/kiln", "-n", platform.APIServerNamespace, "--reuse-values",
			"--set", "operator.logLevel=info", "--set", "operator.replicas=2", "--set", "operator.podDisruptionBudget.enabled=true",
			"--wait", "--timeout", "5m")
		time.Sleep(2 * time.Second)
		close(stop)
		wg.Wait()
		Expect(attempts.Load()).To(BeNumerically(">", 200))
		AddReportEntry("admissions during the upgrade", attempts.Load())
		Expect(failures.Load()).To(BeZero(), "%d of %d admissions failed during the upgrade, the first: %v", failures.Load(), attempts.Load(), firstFailure.Load())

		deploy := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: platform.APIServerNamespace, Name: platform.ReleaseName + "-operator"}, deploy)).To(Succeed())
		Expect(deploy.Status.ReadyReplicas).To(BeEquivalentTo(2))
		Expect(deploy.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--zap-log-level=info"))

		By("the pre-upgrade hook applied the CRDs (server-side, as kiln-operator)")
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: apiextensionsv1.GroupName, Version: "v1", Kind: "CustomResourceDefinition"})
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "trainjobs.trainer.kubeflow.org"}, crd)).To(Succeed())
		var managers []string
		for _, m := range crd.GetManagedFields() {
			managers = append(managers, m.Manager)
		}
		Expect(managers).To(ContainElement("kiln-operator"))
	})

	It("hands leadership over within 15s when the leader's pod is killed, missing and doubling no deadline or TTL", func(ctx context.Context) {
		ns := newNamespace(ctx, "chart-handover")
		late := torchJob(ns, "late", 1).ActiveDeadlineSeconds(8).RuntimePatch(podPatch("node", map[string]string{annDuration: "300s"})).Obj()
		Expect(k8s.Create(ctx, late)).To(Succeed())
		done := torchJob(ns, "done", 1).TTLSecondsAfterFinished(8).Obj()
		Expect(k8s.Create(ctx, done)).To(Succeed())
		waitCondition(ctx, ns, "done", trainer.TrainJobComplete, metav1.ConditionTrue, "")
		Eventually(ctx, func(g Gomega) {
			g.Expect(getTrainJob(ctx, g, ns, "late").Status.StartTime).NotTo(BeNil())
		}).Should(Succeed())

		leader := leaderPod(ctx)
		pod := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: platform.APIServerNamespace, Name: leader}, pod)).To(Succeed())
		crashPods(ctx, *pod)
		killed := time.Now()
		Eventually(ctx, func() string { return leaderPod(ctx) }).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).
			ShouldNot(Or(Equal(leader), BeEmpty()))
		handover := time.Since(killed)
		Expect(handover).To(BeNumerically("<", 15*time.Second), "handed over")
		AddReportEntry("leader handover after a crash", handover.String())

		waitCondition(ctx, ns, "late", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
		Eventually(ctx, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "done"}, &trainer.TrainJob{}))
		}).Should(BeTrue())
		// The events are written in the background, after what they announce: there once, then stay one.
		once := func(g Gomega) {
			g.Expect(events(ctx, g, ns, "late", trainer.TrainJobDeadlineExceededReason)).To(HaveLen(1))
			g.Expect(events(ctx, g, ns, "done", "TTLExpired")).To(HaveLen(1))
		}
		Eventually(ctx, once).Should(Succeed())
		Consistently(ctx, once).WithTimeout(3 * time.Second).Should(Succeed())
	})

	It("uninstalls, leaving the CRDs and the users' TrainJobs, and nothing else of Kiln's", func(ctx context.Context) {
		ns := newNamespace(ctx, "chart-uninstall")
		Expect(k8s.Create(ctx, torchJob(ns, "kept", 1).Obj())).To(Succeed())
		waitCondition(ctx, ns, "kept", trainer.TrainJobComplete, metav1.ConditionTrue, "")
		DeferCleanup(func(ctx context.Context) {
			By("installing the chart again for the specs that follow")
			cmd := exec.CommandContext(ctx, p.Bin("kiln-platform"), "--root", p.Root, "up")
			cmd.Env = append(os.Environ(), platform.EnvInstall+"="+string(platform.InstallChart))
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
		})

		helm(ctx, "uninstall", platform.ReleaseName, "-n", platform.APIServerNamespace, "--wait", "--timeout", "3m")

		selector := client.MatchingLabels{"app.kubernetes.io/instance": platform.ReleaseName, "app.kubernetes.io/name": "kiln"}
		for _, list := range []client.ObjectList{
			&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ServiceAccountList{}, &corev1.SecretList{}, &corev1.PodList{},
		} {
			Eventually(ctx, func(g Gomega) {
				g.Expect(k8s.List(ctx, list, client.InNamespace(platform.APIServerNamespace), selector)).To(Succeed())
				items, err := meta.ExtractList(list)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(items).To(BeEmpty(), "%T left behind", list)
			}).Should(Succeed())
		}
		for _, kind := range []string{"ClusterRoleList", "ClusterRoleBindingList", "MutatingWebhookConfigurationList", "ValidatingWebhookConfigurationList"} {
			l := &unstructured.UnstructuredList{}
			group := "rbac.authorization.k8s.io"
			if strings.Contains(kind, "Webhook") {
				group = "admissionregistration.k8s.io"
			}
			l.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind})
			Expect(k8s.List(ctx, l, selector)).To(Succeed())
			Expect(l.Items).To(BeEmpty(), "%s left behind", kind)
		}
		runtimes := &trainer.ClusterTrainingRuntimeList{}
		Expect(k8s.List(ctx, runtimes)).To(Succeed())
		Expect(runtimes.Items).To(BeEmpty())

		By("JobSet's and Kueue's objects are gone too, and the chart's queues (its pre-delete hook)")
		deploys := &appsv1.DeploymentList{}
		Expect(k8s.List(ctx, deploys, client.InNamespace(platform.APIServerNamespace))).To(Succeed())
		Expect(deploys.Items).To(BeEmpty())
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			// JobSet's chart does not prefix its configurations with the release's name.
			for _, name := range []string{"jobset-mutating-webhook-configuration", platform.ReleaseName + "-kueue-mutating-webhook-configuration",
				"jobset-validating-webhook-configuration", platform.ReleaseName + "-kueue-validating-webhook-configuration"} {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: kind})
				err := k8s.Get(ctx, client.ObjectKey{Name: name}, u)
				Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s %s: %v", kind, name, err)
			}
		}
		By("Kueue's aggregated ClusterRoles stay deleted (the pre-delete hook keeps the aggregation controller from recreating them)")
		for _, role := range []string{"kueue-batch-admin-role", "kueue-batch-user-role"} {
			err := k8s.Get(ctx, client.ObjectKey{Name: platform.ReleaseName + "-" + role}, &rbacv1.ClusterRole{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ClusterRole %s-%s: %v", platform.ReleaseName, role, err)
		}
		for _, kind := range []string{"ResourceFlavor", "ClusterQueue"} {
			u := kueueObject(kind, "", platform.ChartQueue)
			Eventually(ctx, func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(u), u)) }).Should(BeTrue(), kind)
		}

		By("the CRDs, Kueue's included (kept by policy), and the user's TrainJob stay")
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "clusterqueues.kueue.x-k8s.io"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "jobsets.jobset.x-k8s.io"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept"}, &trainer.TrainJob{})).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "trainjobs.trainer.kubeflow.org"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
	})
})

// leaderPod is the operator pod holding its leader election Lease ("" when none does).
func leaderPod(ctx context.Context) string {
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: platform.APIServerNamespace, Name: operatorLease}, lease); err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	if lease.Spec.RenewTime != nil && lease.Spec.LeaseDurationSeconds != nil &&
		time.Since(lease.Spec.RenewTime.Time) > time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second {
		return "" // expired
	}
	holder, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return holder
}
