package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	crdfiles "github.com/kiln-ml/kiln/api/config/crd"
	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// conformance labels the specs an admin runs against any cluster where Kiln's chart is
// installed (make test-conformance, or the release's kiln-conformance binary): they need
// only KUBECONFIG (cluster-admin: they create namespaces) and, for the API server's,
// KILN_CONFIG; nothing of the local platform. Their pods are real: they run the catalog's
// torch-distributed image (or KILN_CONFORMANCE_IMAGE) on the nodes the variables below pick.
const conformance = "conformance"

// The conformance suite's settings, from the environment (docs/install.md lists them).
const (
	// EnvConformanceImage is an image with Python and torch the cluster can pull; empty
	// keeps the runtime's own.
	EnvConformanceImage = "KILN_CONFORMANCE_IMAGE"
	// EnvConformanceRuntime is the ClusterTrainingRuntime the jobs run on (torch-distributed).
	EnvConformanceRuntime = "KILN_CONFORMANCE_RUNTIME"
	// EnvConformanceNodeSelector is key=value[,key=value] the jobs' pods select.
	EnvConformanceNodeSelector = "KILN_CONFORMANCE_NODE_SELECTOR"
	// EnvConformanceTolerations is key=value:Effect[,...] (or key:Effect) the pods tolerate.
	EnvConformanceTolerations = "KILN_CONFORMANCE_TOLERATIONS"
)

// conformanceRun says whether this process is the conformance suite: the binary
// kiln-conformance, or KILN_CONFORMANCE=1.
func conformanceRun() bool {
	return os.Getenv("KILN_CONFORMANCE") == "1" || strings.TrimSuffix(filepath.Base(os.Args[0]), ".test") == "kiln-conformance"
}

// conformanceJob is a TrainJob of the conformance suite: nodes torchrun nodes running script
// on the runtime, image and nodes the admin chose (the KILN_CONFORMANCE_* variables).
func conformanceJob(ns, name string, nodes int32, script string) *trainer.TrainJob {
	GinkgoHelper()
	runtime := os.Getenv(EnvConformanceRuntime)
	if runtime == "" {
		runtime = "torch-distributed"
	}
	w := kilntesting.MakeTrainJob(name, ns).RuntimeRef(trainer.ClusterTrainingRuntimeKind, runtime).
		NumNodes(nodes).NumProcPerNode(1).Command("sh", "-c", script)
	if img := os.Getenv(EnvConformanceImage); img != "" {
		w = w.Image(img)
	}
	selector, err := parseSelector(os.Getenv(EnvConformanceNodeSelector))
	Expect(err).NotTo(HaveOccurred(), EnvConformanceNodeSelector)
	tolerations, err := parseTolerations(os.Getenv(EnvConformanceTolerations))
	Expect(err).NotTo(HaveOccurred(), EnvConformanceTolerations)
	w = w.RuntimePatch(trainer.RuntimePatch{
		Manager: "conformance.kiln.dev/placement",
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
			Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{
				Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
					NodeSelector: selector, Tolerations: tolerations, TerminationGracePeriodSeconds: ptr.To[int64](10),
				}}},
			}}}},
		}},
	})
	return w.Obj()
}

func parseSelector(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func parseTolerations(s string) ([]corev1.Toleration, error) {
	if s == "" {
		return nil, nil
	}
	var out []corev1.Toleration
	for t := range strings.SplitSeq(s, ",") {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value:Effect or key:Effect", t)
		}
		tol := corev1.Toleration{Key: kv, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(effect)}
		if k, v, ok := strings.Cut(kv, "="); ok {
			tol = corev1.Toleration{Key: k, Operator: corev1.TolerationOpEqual, Value: v, Effect: corev1.TaintEffect(effect)}
		}
		out = append(out, tol)
	}
	return out, nil
}

// conformanceScript is a two-rank torchrun rendezvous over gloo: each rank all-reduces its
// rank, rank 0 posts the result to the status server the raw way the Kubeflow SDK does,
// with the three variables the operator injected (which proves pods reach it).
const conformanceScript = `cat > /tmp/c.py <<'EOF'
import json, os, ssl, time, urllib.request
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank)])
dist.all_reduce(t)
print(f"rank {rank}/{world} all-reduce {t.item():.0f}", flush=True)
if rank == 0:
    body = {"trainerStatus": {"progressPercentage": 100, "estimatedRemainingSeconds": 0,
        "metrics": [{"name": "allreduce", "value": f"{t.item():.0f}"}],
        "lastUpdatedTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}
    token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
    req = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    ctx = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
    with urllib.request.urlopen(req, context=ctx, timeout=30) as res:
        print("status server", res.status, flush=True)
dist.barrier()
dist.destroy_process_group()
EOF
exec torchrun /tmp/c.py`

var _ = Describe("Conformance", Label(conformance), func() {
	BeforeEach(func() {
		if os.Getenv(platform.EnvInstall) == string(platform.InstallProcesses) {
			Skip("the conformance suite checks an install by the chart; make test-e2e-chart runs it")
		}
	})

	It("serves Kiln's kinds from CRDs its release wrote, with the operator's pods ready and the catalog's runtimes", func(ctx context.Context) {
		versions := map[string]string{}
		// Every CRD of this release: <group>_<plural>.yaml in api/config/crd.
		files, err := fs.ReadDir(crdfiles.Files, ".")
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty())
		for _, f := range files {
			group, plural, _ := strings.Cut(strings.TrimSuffix(f.Name(), ".yaml"), "_")
			name := plural + "." + group
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed(), "the CRD %s: is Kiln's chart installed?", name)
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			Expect(established).To(BeTrue(), "CRD %s is not Established", name)
			Expect(crd.Annotations).To(HaveKey(kiln.AnnotationCRDsVersion), "CRD %s was not written by Kiln's CRD hook", name)
			versions[crd.Annotations[kiln.AnnotationCRDsVersion]] = name
		}
		Expect(versions).To(HaveLen(1), "the CRDs are of different releases: %v", versions)
		for v := range versions {
			AddReportEntry("Kiln release of the CRDs", v)
		}
		sv, err := clientset.Discovery().ServerVersion()
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("Kubernetes", sv.GitVersion)

		deployments := &appsv1.DeploymentList{}
		Expect(k8s.List(ctx, deployments, client.MatchingLabels{"app.kubernetes.io/name": "kiln"})).To(Succeed())
		components := map[string]bool{}
		for _, d := range deployments.Items {
			c := d.Labels["app.kubernetes.io/component"]
			components[c] = true
			Expect(d.Status.ReadyReplicas).To(BeNumerically(">=", 1), "deployment %s/%s has no ready pod", d.Namespace, d.Name)
			Expect(d.Status.ReadyReplicas).To(Equal(ptr.Deref(d.Spec.Replicas, 1)), "deployment %s/%s: %d of %d pods ready", d.Namespace, d.Name, d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 1))
		}
		Expect(components).To(HaveKey("operator"), "no Deployment labelled app.kubernetes.io/name=kiln, component operator")

		runtimes := &trainer.ClusterTrainingRuntimeList{}
		Expect(k8s.List(ctx, runtimes)).To(Succeed())
		var names []string
		for _, r := range runtimes.Items {
			names = append(names, r.Name)
		}
		Expect(names).To(ContainElement("torch-distributed"), "the catalog's ClusterTrainingRuntimes")
	})

	It("refuses an invalid TrainJob naming the field, and accepts a valid one in a server-side dry run", func(ctx context.Context) {
		ns := newNamespace(ctx, "conformance")
		// An environment variable the torch runtime sets itself: only Kiln's webhook refuses it.
		bad := conformanceJob(ns, "bad-env", 2, "true")
		bad.Spec.Trainer.Env = []corev1.EnvVar{{Name: "PET_NNODES", Value: "3"}}
		err := k8s.Create(ctx, bad)
		Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(ContainSubstring("spec.trainer.env[0].name"), ContainSubstring("PET_NNODES is set by Kiln")))
		good := conformanceJob(ns, "dry", 2, "true")
		Expect(k8s.Create(ctx, good, client.DryRunAll)).To(Succeed())
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(good), &trainer.TrainJob{}))).To(BeTrue(), "a dry run stored the job")
	})

	It("trains a two-node torchrun job to Complete: rendezvous, the status server, logs, times, then its TTL", func(ctx context.Context) {
		ns := newNamespace(ctx, "conformance")
		tj := conformanceJob(ns, "allreduce", 2, conformanceScript)
		tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](30)
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		key := client.ObjectKeyFromObject(tj)
		done := waitConditionWithin(ctx, 5*time.Minute, ns, tj.Name, trainer.TrainJobComplete, metav1.ConditionTrue, "")
		Expect(done.Status.StartTime).NotTo(BeNil())
		Expect(done.Status.CompletionTime).NotTo(BeNil())
		Expect(done.Status.TrainerStatus).NotTo(BeNil(), "rank 0 posted to the status server: no trainerStatus")
		Expect(done.Status.TrainerStatus.Metrics).To(ContainElement(trainer.Metric{Name: "allreduce", Value: "1"}))
		Expect(*done.Status.TrainerStatus.ProgressPercentage).To(BeEquivalentTo(100))

		pods := podsOf(ctx, Default, ns, tj.Name)
		Expect(pods).To(HaveLen(2))
		var logs []string
		for _, p := range pods {
			b, err := clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			Expect(err).NotTo(HaveOccurred())
			logs = append(logs, string(b))
		}
		Expect(strings.Join(logs, "")).To(And(ContainSubstring("rank 0/2 all-reduce 1"), ContainSubstring("rank 1/2 all-reduce 1"), ContainSubstring("status server 200")))

		Eventually(ctx, func() error { return k8s.Get(ctx, key, &kiln.TrainJobMetrics{}) }).WithTimeout(20*time.Second).Should(Succeed(), "the job's metrics history")
		Eventually(ctx, func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key, &trainer.TrainJob{})) }).
			WithTimeout(90*time.Second).Should(BeTrue(), "deleted 30 s after it finished (ttlSecondsAfterFinished)")
	})

	It("fails a job at its activeDeadlineSeconds and stops its pods", func(ctx context.Context) {
		ns := newNamespace(ctx, "conformance")
		tj := conformanceJob(ns, "deadline", 1, "echo started; exec sleep 600")
		tj.Spec.ActiveDeadlineSeconds = ptr.To[int64](20)
		Expect(k8s.Create(ctx, tj)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(ContainElement(HaveField("Status.Phase", corev1.PodRunning)))
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		got := waitConditionWithin(ctx, 2*time.Minute, ns, tj.Name, trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
		Expect(got.Status.CompletionTime).NotTo(BeNil())
		Eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			for _, p := range pods.Items {
				g.Expect(p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded).
					To(BeTrue(), "pod %s still %s", p.Name, p.Status.Phase)
			}
		}).WithTimeout(time.Minute).Should(Succeed())
	})

	It("answers the API server's user and refuses a caller without a token", func(ctx context.Context) {
		jobs, queues, kc := apiClient()
		_, err := jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: kc.Namespace}))
		Expect(err).NotTo(HaveOccurred())
		_, err = queues.ListQueues(ctx, connect.NewRequest(&kilnv1.ListQueuesRequest{Namespace: kc.Namespace}))
		Expect(err).NotTo(HaveOccurred())
		hc, err := kc.HTTPClient()
		Expect(err).NotTo(HaveOccurred())
		_, err = kilnv1connect.NewTrainJobServiceClient(hc, kc.Server).ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: kc.Namespace}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodeUnauthenticated))
	})
})
