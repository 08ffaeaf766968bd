package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/internal/platform/realnode"
)

// upgrade labels the specs of `make test-upgrade`: the platform installed the previous
// release (KILN_CHART_FROM) by its chart; they start work on it, upgrade to this clone's
// chart and images, and check what the upgrade kept.
const upgrade = "upgrade"

var _ = Describe("Upgrade from the previous release", Label(upgrade), Serial, Ordered, func() {
	var (
		p        *platform.Platform
		ns       string
		running  *trainer.TrainJob
		deadline *trainer.TrainJob
		queued   *trainer.TrainJob
		held     *trainer.TrainJob
		podUIDs  map[string]types.UID
		jobSet   types.UID
		cron     *kiln.CronTrainJob
		cq       *unstructured.Unstructured
		// When the upgrade began and ended.
		upgradeStart, upgradeEnd time.Time
	)
	const deadlineSeconds = 150

	BeforeAll(func(ctx context.Context) {
		root := os.Getenv("KILN_ROOT")
		if os.Getenv(platform.EnvChartFrom) == "" || root == "" {
			Skip("make test-upgrade runs these: the platform installed a previous release (KILN_CHART_FROM)")
		}
		p = &platform.Platform{Config: platform.DefaultConfig(root), Out: GinkgoWriter}
		// Created here, so that they outlive each spec of this ordered container.
		ns = newNamespace(ctx, "upgrade")
		cq = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
			"metadata": map[string]any{"name": ns},
			"spec": map[string]any{
				"namespaceSelector": map[string]any{}, "stopPolicy": "Hold",
				"resourceGroups": []any{map[string]any{
					"coveredResources": []any{"cpu", "memory", "nvidia.com/gpu"},
					"flavors": []any{map[string]any{"name": platform.FlavorGPU, "resources": []any{
						map[string]any{"name": "cpu", "nominalQuota": "64"}, map[string]any{"name": "memory", "nominalQuota": "512Gi"},
						map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "16"},
					}}},
				}},
			},
		}}
		Expect(k8s.Create(ctx, cq)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, cq))).To(Succeed()) })
	})

	It("runs the previous release, installed from the registry by its chart", func(ctx context.Context) {
		out, err := p.Helm(ctx, "list", "-n", platform.APIServerNamespace, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		from := filepath.Base(os.Getenv(platform.EnvChartFrom))
		Expect(out).To(ContainSubstring(`"chart":"kiln-` + strings.TrimPrefix(from, "v") + `"`))
		op := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: platform.APIServerNamespace, Name: "kiln-operator"}, op)).To(Succeed())
		Expect(op.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix("/kiln/kiln-operator:" + from))
	})

	It("starts running, queued, suspended and scheduled work on it", func(ctx context.Context) {
		// Runs on the real node through the upgrade, and finishes only when told to.
		running = realJob(ns, "running", 1, "echo started; while [ ! -e /tmp/stop ]; do sleep 1; done; echo stopped")
		Expect(k8s.Create(ctx, running)).To(Succeed())
		// Its deadline falls after the upgrade: it fires once, counted from its start.
		deadline = realJob(ns, "deadline", 1, "echo started; exec sleep 3600")
		deadline.Spec.ActiveDeadlineSeconds = ptr.To[int64](deadlineSeconds)
		Expect(k8s.Create(ctx, deadline)).To(Succeed())
		// Waits in a held ClusterQueue.
		lq := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
			"metadata": map[string]any{"name": "held", "namespace": ns}, "spec": map[string]any{"clusterQueue": ns},
		}}
		Expect(k8s.Create(ctx, lq)).To(Succeed())
		queued = torchJob(ns, "queued", 2).Queue("held").ResourcesPerNode(gpusPerNode("8", "")).Obj()
		Expect(k8s.Create(ctx, queued)).To(Succeed())
		// Suspended by its user.
		held = torchJob(ns, "suspended", 1).Suspend(true).Obj()
		Expect(k8s.Create(ctx, held)).To(Succeed())
		// A run every minute.
		cron = cronTrainJob(ns, "every-minute", "* * * * *", kiln.AllowConcurrent)
		cron.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](20) // every run stays, to be counted
		Expect(k8s.Create(ctx, cron)).To(Succeed())

		By("waiting for the jobs to run, the queued one to wait, and the schedule's first run")
		Eventually(ctx, func(g Gomega) {
			for _, tj := range []*trainer.TrainJob{running, deadline} {
				pods := podsOf(ctx, g, ns, tj.Name)
				g.Expect(pods).To(HaveLen(1))
				g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodRunning), "%s", tj.Name)
			}
			g.Expect(runsOf(ctx, g, ns, cron.Name)).NotTo(BeEmpty())
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		podUIDs = map[string]types.UID{}
		Eventually(ctx, func(g Gomega) {
			for _, pod := range podsOf(ctx, g, ns, running.Name) {
				podUIDs[pod.Name] = pod.UID
			}
			jobSet = jobSetOf(ctx, g, running).GetUID()
		}).Should(Succeed())
		got := getTrainJob(ctx, Default, ns, queued.Name)
		Expect(ptr.Deref(got.Spec.Suspend, false)).To(BeTrue(), "the held queue's job is not admitted")
	})

	It("upgrades to this build: the hook upgrades the CRDs first, the new operator takes over", func(ctx context.Context) {
		tag := func(name string) string {
			ref, err := realnode.ArchiveRef(filepath.Join(p.BinDir, "images", name+".tar"))
			Expect(err).NotTo(HaveOccurred())
			_, t, _ := strings.Cut(ref, ":")
			return t
		}
		current := tag("kiln-operator")
		version, err := p.UpgradeVersion()
		Expect(err).NotTo(HaveOccurred())
		// docs/install.md's commands as written, with its REGISTRY and VERSION; helm trusts
		// the platform's registry by its CA (SSL_CERT_FILE), as a cluster's admin's would.
		script := docScript(filepath.Join(p.Root, "docs", "install.md"), "### Upgrading from a release", "REGISTRY=registry.internal VERSION=0.3.0")
		helmHome := GinkgoT().TempDir()
		upgradeStart = time.Now()
		cmd := exec.CommandContext(ctx, "bash", "-euxo", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+p.BinDir+":"+os.Getenv("PATH"), "REGISTRY="+p.RegistryHost(), "VERSION="+version,
			"SSL_CERT_FILE="+p.PKI().CAFile(), "HELM_CACHE_HOME="+helmHome+"/cache", "HELM_CONFIG_HOME="+helmHome+"/config", "HELM_DATA_HOME="+helmHome+"/data")
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "docs/install.md's upgrade:\n%s", out)
		upgradeEnd = time.Now()
		AddReportEntry("upgrade", string(out))
		rel, err := p.Helm(ctx, "list", "-n", platform.APIServerNamespace, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), rel)
		Expect(rel).To(ContainSubstring(`"chart":"kiln-` + version + `"`))
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "trainjobs.trainer.kubeflow.org"}, crd)).To(Succeed())
		Expect(crd.Annotations).To(HaveKeyWithValue(kiln.AnnotationCRDsVersion, current), "the CRD hook applied this build's CRDs")
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(platform.APIServerNamespace), client.MatchingLabels{"app.kubernetes.io/component": "operator"})).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			for _, pod := range pods.Items {
				g.Expect(pod.Spec.Containers[0].Image).To(HaveSuffix("/kiln/kiln-operator:v"+version), "pod %s", pod.Name)
			}
		}).WithTimeout(2 * time.Minute).Should(Succeed())
	})

	It("kept the running job's pods, its JobSet and its place: nothing restarted", func(ctx context.Context) {
		// A reconcile of the new operator that re-rendered the JobSet would show here within seconds.
		Consistently(ctx, func(g Gomega) {
			g.Expect(jobSetOf(ctx, g, running).GetUID()).To(Equal(jobSet))
			pods := podsOf(ctx, g, ns, running.Name)
			g.Expect(pods).To(HaveLen(len(podUIDs)))
			for _, pod := range pods {
				g.Expect(podUIDs).To(HaveKeyWithValue(pod.Name, pod.UID))
				g.Expect(pod.Status.ContainerStatuses).To(HaveEach(HaveField("RestartCount", BeZero())))
			}
			tj := getTrainJob(ctx, g, ns, running.Name)
			g.Expect(meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed)).To(BeFalse())
			g.Expect(tj.Status.Restarts).To(Or(BeNil(), HaveField("Count", BeZero())))
		}).WithTimeout(20 * time.Second).WithPolling(2 * time.Second).Should(Succeed())

		By("the job finishes when its trainer does")
		pods := podsOf(ctx, Default, ns, running.Name)
		out, err := kubectl("", "exec", "-n", ns, pods[0].Name, "--", "touch", "/tmp/stop")
		Expect(err).NotTo(HaveOccurred(), out)
		waitConditionWithin(ctx, 2*time.Minute, ns, running.Name, trainer.TrainJobComplete, metav1.ConditionTrue, "")
	})

	It("fires the deadline once, counted from the job's start before the upgrade", func(ctx context.Context) {
		got := waitConditionWithin(ctx, 4*time.Minute, ns, deadline.Name, trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
		Expect(got.Status.StartTime).NotTo(BeNil())
		failed := conditionOf(got, trainer.TrainJobFailed).LastTransitionTime.Time
		Expect(failed.Sub(got.Status.StartTime.Time)).To(And(
			BeNumerically(">=", deadlineSeconds*time.Second-time.Second), BeNumerically("<", (deadlineSeconds+30)*time.Second)),
			"failed %s after its start, deadline %ds", failed.Sub(got.Status.StartTime.Time), deadlineSeconds)
		events := &corev1.EventList{}
		Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		n := 0
		for _, e := range events.Items {
			if e.InvolvedObject.Name == deadline.Name && e.Reason == trainer.TrainJobDeadlineExceededReason {
				n += int(max(e.Count, 1))
			}
		}
		Expect(n).To(BeNumerically("<=", 1), "DeadlineExceeded events of %s", deadline.Name)
	})

	It("admits the queued job once its queue is released, resumes the suspended one, and keeps scheduling once a minute", func(ctx context.Context) {
		Expect(k8s.Patch(ctx, cq, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"stopPolicy":"None"}}`)))).To(Succeed())
		waitConditionWithin(ctx, 3*time.Minute, ns, queued.Name, trainer.TrainJobComplete, metav1.ConditionTrue, "")
		Expect(k8s.Patch(ctx, held, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":false}}`)))).To(Succeed())
		waitConditionWithin(ctx, 3*time.Minute, ns, held.Name, trainer.TrainJobComplete, metav1.ConditionTrue, "")

		By("a run for every minute since the schedule was created, none twice, through the upgrade")
		var runs []trainer.TrainJob
		Eventually(ctx, func(g Gomega) {
			runs = runsOf(ctx, g, ns, cron.Name)
			g.Expect(scheduledTime(runs[len(runs)-1])).To(BeTemporally(">", time.Now().Add(-90*time.Second)), "a run of the last minute")
			g.Expect(scheduledTime(runs[len(runs)-1])).To(BeTemporally(">", upgradeEnd), "a run scheduled after the upgrade")
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		Expect(scheduledTime(runs[0])).To(BeTemporally("<", upgradeStart), "a run scheduled before the upgrade")
		for i := 1; i < len(runs); i++ {
			Expect(scheduledTime(runs[i]).Sub(scheduledTime(runs[i-1]))).To(Equal(time.Minute), "runs %s and %s", runs[i-1].Name, runs[i].Name)
		}
	})

	It("reads every stored object through the new release's API and clients", func(ctx context.Context) {
		for _, list := range []client.ObjectList{&trainer.TrainJobList{}, &trainer.ClusterTrainingRuntimeList{}, &trainer.TrainingRuntimeList{},
			&kiln.CronTrainJobList{}, &kiln.TrainJobMetricsList{}} {
			Expect(k8s.List(ctx, list)).To(Succeed(), "%T", list)
		}
		jobs, _, kc := apiClient()
		res, err := jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: ns}))
		if connect.CodeOf(err) == connect.CodePermissionDenied {
			letCLIUserIn(ctx, ns)
			Eventually(ctx, func() error {
				res, err = jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: ns}))
				return err
			}).Should(Succeed())
		}
		Expect(err).NotTo(HaveOccurred(), "as %s", kc.Namespace)
		var names []string
		for _, tj := range res.Msg.GetTrainJobs() {
			names = append(names, tj.GetName())
		}
		Expect(names).To(ContainElements(running.Name, deadline.Name, queued.Name, held.Name))
	})
})

// podsOf are the pods of a TrainJob's JobSet.
func podsOf(ctx context.Context, g Gomega, ns, name string) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name})).To(Succeed())
	return pods.Items
}

// jobSetOf is a TrainJob's JobSet (unstructured: the suite's scheme has no JobSet).
func jobSetOf(ctx context.Context, g Gomega, tj *trainer.TrainJob) *unstructured.Unstructured {
	js := &unstructured.Unstructured{}
	js.SetAPIVersion("jobset.x-k8s.io/v1alpha2")
	js.SetKind("JobSet")
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tj), js)).To(Succeed())
	return js
}
