package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func newJob(name string) *kilnv1.NewTrainJob {
	return &kilnv1.NewTrainJob{Name: name, Spec: &kilnv1.TrainJobSpec{
		Runtime: "torch-distributed", Image: "docker.io/my-training-image:latest", Command: []string{"torchrun", "train.py"},
		Nodes: 2, ResourcesPerNode: &kilnv1.Resources{Limits: map[string]string{"nvidia.com/gpu": "8"}},
		ActiveDeadlineSeconds: ptr.To[int64](600),
	}}
}

func create(ctx context.Context, c clients, ns string, job *kilnv1.NewTrainJob) *kilnv1.TrainJob {
	GinkgoHelper()
	res, err := c.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
		Namespace: ns, Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: job},
	}))
	Expect(err).NotTo(HaveOccurred())
	return res.Msg.GetTrainJob()
}

func adminTrainJob(ctx context.Context, ns, name string) (*trainer.TrainJob, error) {
	tj := &trainer.TrainJob{}
	return tj, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj)
}

var _ = Describe("Authentication", func() {
	for _, p := range protocols {
		It("refuses calls without a valid token over "+p.name, func(ctx SpecContext) {
			_, err := p.as("").jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: "team-a"}))
			Expect(connect.CodeOf(err)).To(Equal(connect.CodeUnauthenticated))
			Expect(err.Error()).To(ContainSubstring("Authorization: Bearer"))

			tokens["forged"] = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJub2JvZHkifQ.c2lnbmF0dXJl"
			_, err = p.as("forged").jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: "team-a"}))
			Expect(connect.CodeOf(err)).To(Equal(connect.CodeUnauthenticated))
		})

		It("tells the caller who they are over "+p.name, func(ctx SpecContext) {
			res, err := p.as("alice").server.GetServerInfo(ctx, connect.NewRequest(&kilnv1.GetServerInfoRequest{}))
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Msg.GetUser()).To(Equal("system:serviceaccount:team-a:alice"))
			Expect(res.Msg.GetKubernetesVersion()).To(HavePrefix("v1."))
			Expect(res.Msg.GetKueue()).To(BeTrue())
		})
	}
})

var _ = Describe("TrainJobService", func() {
	for _, p := range protocols {
		Context("over "+p.name, func() {
			var alice, bob, carol, dana clients
			BeforeEach(func() {
				alice, bob, carol, dana = p.as("alice"), p.as("bob"), p.as("carol"), p.as("dana")
			})
			name := func(s string) string { return p.prefix() + s }

			It("creates a job from fields as the caller, and reads it back with its timers", func(ctx SpecContext) {
				got := create(ctx, alice, "team-a", newJob(name("fields")))
				Expect(got.GetName()).To(Equal(name("fields")))
				Expect(got.GetUid()).NotTo(BeEmpty())
				Expect(got.GetStatus().GetActiveDeadlineSeconds()).To(BeEquivalentTo(600), "the job's own deadline")
				Expect(got.GetStatus().GetTtlSecondsAfterFinished()).To(BeEquivalentTo(86400), "the runtime's TTL")

				tj, err := adminTrainJob(ctx, "team-a", name("fields"))
				Expect(err).NotTo(HaveOccurred())
				Expect(*tj.Spec.Trainer.NumNodes).To(BeEquivalentTo(2))
				Expect(tj.Spec.Trainer.ResourcesPerNode.Limits).To(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
				Expect(tj.ManagedFields).NotTo(BeEmpty())
				Expect(tj.ManagedFields[0].Manager).To(Equal("kiln-apiserver"))

				res, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: name("fields"), IncludeManifest: true}))
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Msg.GetTrainJob().GetUid()).To(Equal(got.GetUid()))
				Expect(res.Msg.GetTrainJob().GetSpec().GetImage()).To(Equal("docker.io/my-training-image:latest"))
				Expect(res.Msg.GetManifest()).To(ContainSubstring("kind: TrainJob"))

				// The operator would set startTime; the API shows when the deadline fires.
				start := metav1.NewTime(time.Now().Truncate(time.Second))
				tj.Status.StartTime = &start
				Expect(admin.Status().Update(ctx, tj)).To(Succeed())
				Eventually(ctx, func(g Gomega) {
					res, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: name("fields")}))
					g.Expect(err).NotTo(HaveOccurred())
					st := res.Msg.GetTrainJob().GetStatus()
					g.Expect(st.GetState()).To(Equal(kilnv1.State_STATE_RUNNING))
					g.Expect(st.GetDeadlineTime().AsTime()).To(BeTemporally("==", start.Add(600*time.Second)))
				}).Should(Succeed())
			})

			It("shows the run policy the job was pinned to, not its runtime's current one", func(ctx SpecContext) {
				job := newJob(name("pinned"))
				job.Spec.ActiveDeadlineSeconds = nil
				created := create(ctx, alice, "team-a", job)
				Expect(created.GetStatus().GetActiveDeadlineSeconds()).To(BeEquivalentTo(7200), "not pinned yet: the runtime as it is")
				// What the operator stores at the job's first reconcile: the runtime as it was then.
				Expect(admin.Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{
						Namespace: "team-a", Name: trainer.RuntimeSnapshotName(name("pinned")),
						Labels: map[string]string{trainer.LabelRuntimeSnapshot: "true"},
						OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob",
							Name: name("pinned"), UID: types.UID(created.GetUid()), Controller: ptr.To(true)}},
					},
					Data: map[string]string{trainer.RuntimeSnapshotKey: "kind: ClusterTrainingRuntime\nname: torch-distributed\nspec:\n" +
						"  runPolicy: {activeDeadlineSeconds: 60, ttlSecondsAfterFinished: 30}\n  template: {}\n"},
				})).To(Succeed())
				for range 2 { // the second time from the server's memory of it
					Eventually(ctx, func(g Gomega) {
						res, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: name("pinned")}))
						g.Expect(err).NotTo(HaveOccurred())
						g.Expect(res.Msg.GetTrainJob().GetStatus().GetActiveDeadlineSeconds()).To(BeEquivalentTo(60))
						g.Expect(res.Msg.GetTrainJob().GetStatus().GetTtlSecondsAfterFinished()).To(BeEquivalentTo(30))
					}).Should(Succeed())
				}
			})

			It("shows the run policy of the shared snapshot the job was stamped with at admission", func(ctx SpecContext) {
				job := newJob(name("shared"))
				job.Spec.ActiveDeadlineSeconds = nil
				created := create(ctx, alice, "team-a", job)
				Expect(created.GetStatus().GetActiveDeadlineSeconds()).To(BeEquivalentTo(7200), "not pinned yet: the runtime as it is")
				// What the operator's webhook and controller store: the job stamped with the hash
				// of its runtime at admission, and the one snapshot of that hash in the namespace.
				data := "kind: ClusterTrainingRuntime\nname: torch-distributed\nspec:\n" +
					"  runPolicy: {activeDeadlineSeconds: 90, ttlSecondsAfterFinished: 45}\n  template: {}\n"
				hash := trainer.RuntimeSnapshotHash(data)
				tj := &trainer.TrainJob{}
				Expect(admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name("shared")}, tj)).To(Succeed())
				tj.Annotations = map[string]string{trainer.AnnotationRuntimeSnapshot: hash}
				Expect(admin.Update(ctx, tj)).To(Succeed())
				// Shared: the spec's second run (the other protocol) finds the first's.
				Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{
						Namespace: "team-a", Name: trainer.SharedRuntimeSnapshotName(hash),
						Labels: map[string]string{trainer.LabelRuntimeSnapshot: trainer.SharedSnapshot},
					},
					Data: map[string]string{trainer.RuntimeSnapshotKey: data},
				}))).To(Succeed())
				Eventually(ctx, func(g Gomega) {
					res, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: name("shared")}))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(res.Msg.GetTrainJob().GetStatus().GetActiveDeadlineSeconds()).To(BeEquivalentTo(90))
					g.Expect(res.Msg.GetTrainJob().GetStatus().GetTtlSecondsAfterFinished()).To(BeEquivalentTo(45))
				}).Should(Succeed())
			})

			It("creates a job from a manifest, strictly", func(ctx SpecContext) {
				manifest := fmt.Sprintf(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: %s
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {image: img, command: [torchrun, train.py]}
`, name("manifest"))
				res, err := alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_Manifest{Manifest: manifest},
				}))
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Msg.GetTrainJob().GetSpec().GetRuntime()).To(Equal("torch-distributed"))

				_, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_Manifest{Manifest: strings.Replace(manifest, "trainer:", "trainr:", 1)},
				}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument))
				Expect(err.Error()).To(ContainSubstring(`unknown field "spec.trainr"`))
				Expect(fieldViolations(err)).To(ConsistOf("manifest"))

				_, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-b", Source: &kilnv1.CreateTrainJobRequest_Manifest{Manifest: strings.Replace(manifest, "metadata:", "metadata:\n  namespace: team-a", 1)},
				}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument))
				Expect(fieldViolations(err)).To(ConsistOf("namespace"))
			})

			It("names every bad field and the fix", func(ctx SpecContext) {
				bad := newJob("Bad_Name")
				bad.Spec.Runtime = ""
				bad.Spec.Nodes = -2
				bad.Spec.ResourcesPerNode = &kilnv1.Resources{Requests: map[string]string{"memory": "lots"}}
				_, err := alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: bad},
				}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument))
				Expect(fieldViolations(err)).To(ConsistOf("train_job.name", "train_job.spec.runtime", "train_job.spec.nodes",
					"train_job.spec.resources_per_node.requests[memory]"))
				Expect(err.Error()).To(ContainSubstring("kiln runtimes list"))

				_, err = alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Name: "x"}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument))
				Expect(fieldViolations(err)).To(ConsistOf("namespace"))
			})

			It("maps Kubernetes' own refusals to Connect codes", func(ctx SpecContext) {
				_, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: name("missing")}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeNotFound))

				create(ctx, alice, "team-a", newJob(name("twice")))
				_, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: newJob(name("twice"))},
				}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeAlreadyExists))

				// The CRD's own validation (CEL, schema): Invalid with the field it names.
				_, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_Manifest{Manifest: fmt.Sprintf(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: %s}
spec: {runtimeRef: {name: torch-distributed}, ttlSecondsAfterFinished: -5}
`, name("schema"))},
				}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument))
				Expect(fieldViolations(err)).To(ContainElement("spec.ttlSecondsAfterFinished"))

				// A runtime that does not exist: named by the request's field, whichever
				// admission webhook (Kiln's, Kueue's) would have answered first.
				missing := newJob(name("no-runtime"))
				missing.Spec.Runtime = "nope"
				_, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: missing},
				}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument))
				Expect(fieldViolations(err)).To(ConsistOf("train_job.spec.runtime"))
				Expect(err.Error()).To(ContainSubstring(`ClusterTrainingRuntime "nope" not found in the cluster: name an existing runtime`))
				_, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_Manifest{Manifest: fmt.Sprintf(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: %s}
spec: {runtimeRef: {name: nope, kind: TrainingRuntime}}
`, name("no-runtime"))},
				}))
				Expect(fieldViolations(err)).To(ConsistOf("manifest.spec.runtimeRef.name"))
				Expect(err.Error()).To(ContainSubstring(`TrainingRuntime "nope" not found in namespace team-a`))

				_, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-b", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: newJob(name("elsewhere"))},
				}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
				Expect(err.Error()).To(ContainSubstring("system:serviceaccount:team-a:alice"))

				By("refusing her before saying what exists in a namespace she may not write")
				for _, j := range []*kilnv1.NewTrainJob{newJob(name("probe-queue")), newJob(name("probe-runtime"))} {
					if j.Name == name("probe-queue") {
						j.Spec.Queue = "no-such-queue"
					} else {
						j.Spec.Runtime = "no-such-runtime"
					}
					_, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
						Namespace: "team-b", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: j},
					}))
					Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied), "%s: %v", j.Name, err)
					Expect(err.Error()).NotTo(ContainSubstring("does not exist"))
				}
			})

			It("refuses a LocalQueue that does not exist, naming the ones that do", func(ctx SpecContext) {
				teamQueue(ctx, "team-a", "team-queue")
				job := newJob(name("no-queue"))
				job.Spec.Queue = "team-qeue"
				_, err := alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: job},
				}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument))
				Expect(fieldViolations(err)).To(ConsistOf("train_job.spec.queue"))
				Expect(err.Error()).To(ContainSubstring(`LocalQueue "team-qeue" does not exist in namespace team-a (did you mean "team-queue"?), so the job would wait forever: name one of the namespace's`))

				_, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_Manifest{Manifest: fmt.Sprintf(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: %s, labels: {kueue.x-k8s.io/queue-name: gpu-queue}}
spec: {runtimeRef: {name: torch-distributed}}
`, name("no-queue"))},
				}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument))
				Expect(fieldViolations(err)).To(ConsistOf("manifest.metadata.labels[kueue.x-k8s.io/queue-name]"))
				Expect(err.Error()).To(ContainSubstring(`LocalQueue "gpu-queue" does not exist in namespace team-a`))
				Expect(err.Error()).To(ContainSubstring(`so the job would wait forever: name one of the namespace's (` + "`kiln queues list`" + `: "team-queue")`))
				_, err = adminTrainJob(ctx, "team-a", name("no-queue"))
				Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing was created")

				// A runtime misspelt: the nearest one.
				job = newJob(name("no-runtime"))
				job.Spec.Runtime = "torch-distribted"
				_, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: job},
				}))
				Expect(err.Error()).To(ContainSubstring(`ClusterTrainingRuntime "torch-distribted" not found in the cluster (did you mean "torch-distributed"?)`))
			})

			It("tells a job whose LocalQueue is gone that it waits for it, and gives it no place in line", func(ctx SpecContext) {
				// Made by an admin, past the API server's refusal: the queue was deleted after.
				tj := kilntesting.MakeTrainJob(name("ghost-queue"), "team-a").Queue("ghost").Command("torchrun").Obj()
				Expect(admin.Create(ctx, tj)).To(Succeed())
				pendingWorkload(ctx, "team-a", name("ghost-queue"), string(tj.UID), "ghost")
				Eventually(ctx, func(g Gomega) {
					res, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: name("ghost-queue")}))
					g.Expect(err).NotTo(HaveOccurred())
					q := res.Msg.GetTrainJob().GetStatus().GetQueue()
					g.Expect(q.GetLocalQueueMissing()).To(BeTrue())
					g.Expect(q.GetPositionInLocalQueue()).To(BeZero())
				}).Should(Succeed())
			})

			It("hands Kubernetes' admission warnings to the caller", func(ctx SpecContext) {
				res, err := alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: newJob(name("warned"))},
				}))
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Msg.GetWarnings()).To(ContainElement(HaveSuffix(": TrainJobs of this namespace are watched by a test policy")))
				res, err = alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", DryRun: true, Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: newJob(name("warned-dry"))},
				}))
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Msg.GetWarnings()).To(ContainElement(HaveSuffix(": TrainJobs of this namespace are watched by a test policy")), "a dry run is warned too")
			})

			It("validates on a dry run without storing anything", func(ctx SpecContext) {
				res, err := alice.jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
					Namespace: "team-a", DryRun: true, Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: newJob(name("dry"))},
				}))
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Msg.GetManifest()).To(ContainSubstring("name: " + name("dry")))
				_, err = adminTrainJob(ctx, "team-a", name("dry"))
				Expect(apierrors.IsNotFound(err)).To(BeTrue())
			})

			It("creates once under concurrent retries of one request", func(ctx SpecContext) {
				job := newJob("")
				job.GenerateName = name("retry-")
				req := &kilnv1.CreateTrainJobRequest{Namespace: "team-a", RequestId: name("0b6e1c2a-9f1e"), Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: job}}
				var (
					wg       sync.WaitGroup
					mu       sync.Mutex
					uids     = map[string]int{}
					replayed int
				)
				for range 8 {
					wg.Go(func() {
						defer GinkgoRecover()
						res, err := alice.jobs.CreateTrainJob(ctx, connect.NewRequest(req))
						Expect(err).NotTo(HaveOccurred())
						mu.Lock()
						defer mu.Unlock()
						uids[res.Msg.GetTrainJob().GetUid()]++
						if res.Msg.GetReplayed() {
							replayed++
						}
					})
				}
				wg.Wait()
				Expect(uids).To(HaveLen(1), "every retry returned the same job")
				Expect(replayed).To(Equal(7))
				list := &trainer.TrainJobList{}
				Expect(admin.List(ctx, list, client.InNamespace("team-a"))).To(Succeed())
				n := 0
				for _, tj := range list.Items {
					if strings.HasPrefix(tj.Name, name("retry-")) {
						n++
					}
				}
				Expect(n).To(Equal(1))

				other := &kilnv1.CreateTrainJobRequest{Namespace: "team-a", RequestId: req.RequestId, Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: newJob(name("other"))}}
				other.GetTrainJob().Name, other.GetTrainJob().GenerateName = "", name("retry-")
				other.GetTrainJob().Spec.Nodes = 3
				_, err := alice.jobs.CreateTrainJob(ctx, connect.NewRequest(other))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeFailedPrecondition), "the same request_id for a different request")
			})

			It("lists a namespace in pages, and every namespace only where RBAC allows", func(ctx SpecContext) {
				for i := range 5 {
					create(ctx, bob, "team-b", newJob(fmt.Sprintf("%spage-%d", p.prefix(), i)))
				}
				create(ctx, alice, "team-a", newJob(name("page-a")))
				var names []string
				token := ""
				// Read your writes: the next list shows the jobs just created, though it reads
				// the server's cache (no Eventually).
				func(g Gomega) {
					names, token = nil, ""
					for page := 0; ; page++ {
						g.Expect(page).To(BeNumerically("<", 10))
						res, err := bob.jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{
							Namespace: "team-b", PageSize: 2, PageToken: token, LabelSelector: "",
						}))
						g.Expect(err).NotTo(HaveOccurred())
						g.Expect(len(res.Msg.GetTrainJobs())).To(BeNumerically("<=", 2))
						for _, tj := range res.Msg.GetTrainJobs() {
							if strings.HasPrefix(tj.GetName(), name("page-")) {
								names = append(names, tj.GetName())
							}
						}
						if token = res.Msg.GetNextPageToken(); token == "" {
							break
						}
					}
					g.Expect(names).To(Equal([]string{name("page-0"), name("page-1"), name("page-2"), name("page-3"), name("page-4")}))
				}(Default)

				res, err := bob.jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: "team-b", PageSize: 2}))
				Expect(err).NotTo(HaveOccurred())
				_, err = bob.jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: "team-b", LabelSelector: "a=b", PageToken: res.Msg.GetNextPageToken()}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument))
				Expect(fieldViolations(err)).To(ConsistOf("page_token"))

				_, err = bob.jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{AllNamespaces: true}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
				Eventually(ctx, func(g Gomega) {
					all, err := dana.jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{AllNamespaces: true, PageSize: 1000}))
					g.Expect(err).NotTo(HaveOccurred())
					namespaces := map[string]bool{}
					for _, tj := range all.Msg.GetTrainJobs() {
						namespaces[tj.GetNamespace()] = true
					}
					g.Expect(namespaces).To(HaveKey("team-a"))
					g.Expect(namespaces).To(HaveKey("team-b"))
				}).Should(Succeed())

				_, err = bob.jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: "team-b", LabelSelector: "a in (b"}))
				Expect(fieldViolations(err)).To(ConsistOf("label_selector"))
			})

			It("keeps users in their own namespaces", func(ctx SpecContext) {
				create(ctx, alice, "team-a", newJob(name("private")))
				_, err := bob.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: name("private")}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
				_, err = bob.jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: "team-a"}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
				_, err = bob.jobs.DeleteTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteTrainJobRequest{Namespace: "team-a", Name: name("private")}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
				_, err = bob.jobs.SuspendTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendTrainJobRequest{Namespace: "team-a", Name: name("private")}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
				_, err = bob.jobs.ListEvents(ctx, connect.NewRequest(&kilnv1.ListEventsRequest{Namespace: "team-a", Name: name("private")}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
				_, err = carol.jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: "team-c"}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))

				stream, err := bob.jobs.WatchTrainJobs(ctx, connect.NewRequest(&kilnv1.WatchTrainJobsRequest{Namespace: "team-a"}))
				Expect(err).NotTo(HaveOccurred())
				Expect(stream.Receive()).To(BeFalse())
				Expect(connect.CodeOf(stream.Err())).To(Equal(connect.CodePermissionDenied))
			})

			It("suspends and resumes a job", func(ctx SpecContext) {
				create(ctx, alice, "team-a", newJob(name("pause")))
				res, err := alice.jobs.SuspendTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendTrainJobRequest{Namespace: "team-a", Name: name("pause")}))
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Msg.GetTrainJob().GetStatus().GetState()).To(Equal(kilnv1.State_STATE_SUSPENDED))
				tj, err := adminTrainJob(ctx, "team-a", name("pause"))
				Expect(err).NotTo(HaveOccurred())
				Expect(ptr.Deref(tj.Spec.Suspend, false)).To(BeTrue())

				rres, err := alice.jobs.ResumeTrainJob(ctx, connect.NewRequest(&kilnv1.ResumeTrainJobRequest{Namespace: "team-a", Name: name("pause")}))
				Expect(err).NotTo(HaveOccurred())
				Expect(rres.Msg.GetTrainJob().GetStatus().GetState()).To(Equal(kilnv1.State_STATE_RUNNING))
				tj, err = adminTrainJob(ctx, "team-a", name("pause"))
				Expect(err).NotTo(HaveOccurred())
				Expect(ptr.Deref(tj.Spec.Suspend, true)).To(BeFalse())

				tj.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "done", LastTransitionTime: metav1.Now()}}
				Expect(admin.Status().Update(ctx, tj)).To(Succeed())
				_, err = alice.jobs.SuspendTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendTrainJobRequest{Namespace: "team-a", Name: name("pause")}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeFailedPrecondition))
			})

			It("tells a job waiting in Kueue from a suspended one, and suspends it through Kueue", func(ctx SpecContext) {
				job := newJob(name("queued"))
				job.Spec.Queue = "team-queue"
				job.Spec.Suspend = true // as Kueue's webhook sets it
				teamQueue(ctx, "team-a", "team-queue")
				created := create(ctx, alice, "team-a", job)
				wl := workload(ctx, "team-a", name("queued"), created.GetUid(), "team-queue")
				Eventually(ctx, func(g Gomega) {
					res, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: name("queued")}))
					g.Expect(err).NotTo(HaveOccurred())
					st := res.Msg.GetTrainJob().GetStatus()
					g.Expect(st.GetState()).To(Equal(kilnv1.State_STATE_QUEUED))
					g.Expect(st.GetMessage()).To(ContainSubstring("insufficient unused quota"))
					g.Expect(st.GetQueue().GetPositionInLocalQueue()).To(BeNumerically(">=", 1))
					g.Expect(st.GetQueue().GetClusterQueue()).To(Equal("team-cq"))
				}).Should(Succeed())
				pos, err := alice.queues.GetQueuePosition(ctx, connect.NewRequest(&kilnv1.GetQueuePositionRequest{Namespace: "team-a", Name: name("queued")}))
				Expect(err).NotTo(HaveOccurred())
				Expect(pos.Msg.GetPosition().GetWorkload()).To(Equal(wl.GetName()))

				res, err := alice.jobs.SuspendTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendTrainJobRequest{Namespace: "team-a", Name: name("queued")}))
				Expect(err).NotTo(HaveOccurred())
				Expect(res.Msg.GetTrainJob().GetStatus().GetState()).To(Equal(kilnv1.State_STATE_SUSPENDED))
				Expect(admin.Get(ctx, client.ObjectKeyFromObject(wl), wl)).To(Succeed())
				active, _, _ := unstructured.NestedBool(wl.Object, "spec", "active")
				Expect(active).To(BeFalse(), "Kueue deactivates the workload")
				Eventually(ctx, func(g Gomega) {
					res, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: name("queued")}))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(res.Msg.GetTrainJob().GetStatus().GetState()).To(Equal(kilnv1.State_STATE_SUSPENDED))
				}).Should(Succeed())

				rres, err := alice.jobs.ResumeTrainJob(ctx, connect.NewRequest(&kilnv1.ResumeTrainJobRequest{Namespace: "team-a", Name: name("queued")}))
				Expect(err).NotTo(HaveOccurred())
				Expect(rres.Msg.GetTrainJob().GetStatus().GetState()).To(Equal(kilnv1.State_STATE_QUEUED))
				Expect(admin.Get(ctx, client.ObjectKeyFromObject(wl), wl)).To(Succeed())
				active, _, _ = unstructured.NestedBool(wl.Object, "spec", "active")
				Expect(active).To(BeTrue())
			})

			It("deletes a job", func(ctx SpecContext) {
				create(ctx, alice, "team-a", newJob(name("gone")))
				_, err := alice.jobs.DeleteTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteTrainJobRequest{Namespace: "team-a", Name: name("gone")}))
				Expect(err).NotTo(HaveOccurred())
				_, err = adminTrainJob(ctx, "team-a", name("gone"))
				Expect(apierrors.IsNotFound(err)).To(BeTrue())
				_, err = alice.jobs.DeleteTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteTrainJobRequest{Namespace: "team-a", Name: name("gone")}))
				Expect(connect.CodeOf(err)).To(Equal(connect.CodeNotFound))
			})

			It("lists a job's events", func(ctx SpecContext) {
				created := create(ctx, alice, "team-a", newJob(name("events")))
				Expect(admin.Create(ctx, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Namespace: "team-a", GenerateName: "ev-"},
					InvolvedObject: corev1.ObjectReference{Kind: "TrainJob", Namespace: "team-a", Name: name("events"), UID: types.UID(created.GetUid())},
					Reason:         "Created", Message: "Created JobSet " + name("events"), Type: corev1.EventTypeNormal,
					FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1, Source: corev1.EventSource{Component: "kiln-trainjob-controller"},
				})).To(Succeed())
				Expect(admin.Create(ctx, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Namespace: "team-a", GenerateName: "ev-"},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: name("events") + "-node-0-0-abcde"},
					Reason:         "Scheduled", Message: "assigned", Type: corev1.EventTypeNormal, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
				})).To(Succeed())
				Expect(admin.Create(ctx, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Namespace: "team-a", GenerateName: "ev-"},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: name("events") + "-other-node-0-0-abcde"},
					Reason:         "NotMine", Type: corev1.EventTypeNormal, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
				})).To(Succeed())
				res, err := alice.jobs.ListEvents(ctx, connect.NewRequest(&kilnv1.ListEventsRequest{Namespace: "team-a", Name: name("events")}))
				Expect(err).NotTo(HaveOccurred())
				var reasons []string
				for _, e := range res.Msg.GetEvents() {
					reasons = append(reasons, e.GetReason())
				}
				Expect(reasons).To(ConsistOf("Created", "Scheduled"))
			})

			It("streams no logs for a job without pods, and names the steps there are", func(ctx SpecContext) {
				create(ctx, alice, "team-a", newJob(name("logs")))
				stream, err := alice.jobs.StreamLogs(ctx, connect.NewRequest(&kilnv1.StreamLogsRequest{Namespace: "team-a", Name: name("logs")}))
				Expect(err).NotTo(HaveOccurred())
				Expect(stream.Receive()).To(BeFalse())
				Expect(stream.Err()).NotTo(HaveOccurred())
				stream, err = alice.jobs.StreamLogs(ctx, connect.NewRequest(&kilnv1.StreamLogsRequest{Namespace: "team-a", Name: name("logs"), Step: "node-7"}))
				Expect(err).NotTo(HaveOccurred())
				Expect(stream.Receive()).To(BeFalse())
				Expect(connect.CodeOf(stream.Err())).To(Equal(connect.CodeNotFound))
				Expect(stream.Err().Error()).To(ContainSubstring("has not started"))
			})

			It("names the attempts whose logs were kept, its own only", func(ctx SpecContext) {
				created := create(ctx, alice, "team-a", newJob(name("kept")))
				kept := func(pod, attempt string, uid types.UID) *corev1.ConfigMap {
					return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
						Namespace: "team-a", Name: kiln.AttemptLogName(pod),
						Labels: map[string]string{kiln.LabelAttemptLogsOf: name("kept"), kiln.LabelAttempt: attempt},
						OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob",
							Name: name("kept"), UID: uid, Controller: ptr.To(true)}},
					}}
				}
				// Two pods of attempt 1, one of attempt 0, and one left by a deleted namesake.
				for _, cm := range []*corev1.ConfigMap{
					kept(name("kept-a1"), "1", types.UID(created.GetUid())), kept(name("kept-b1"), "1", types.UID(created.GetUid())),
					kept(name("kept-a0"), "0", types.UID(created.GetUid())), kept(name("kept-old"), "3", "a-deleted-namesake"),
				} {
					Expect(admin.Create(ctx, cm)).To(Succeed())
				}
				Eventually(ctx, func(g Gomega) {
					res, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: name("kept")}))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(res.Msg.GetTrainJob().GetStatus().GetKeptLogAttempts()).To(Equal([]int32{0, 1}))
				}).Should(Succeed())
			})

			It("says where the logs of a job that MultiKueue dispatched are", func(ctx SpecContext) {
				tj := kilntesting.MakeTrainJob(name("dispatched"), "team-a").ManagedBy(trainer.MultiKueueControllerName).Obj()
				Expect(admin.Create(ctx, tj)).To(Succeed())
				stream, err := alice.jobs.StreamLogs(ctx, connect.NewRequest(&kilnv1.StreamLogsRequest{Namespace: "team-a", Name: tj.Name}))
				Expect(err).NotTo(HaveOccurred())
				Expect(stream.Receive()).To(BeFalse())
				Expect(connect.CodeOf(stream.Err())).To(Equal(connect.CodeFailedPrecondition))
				Expect(stream.Err().Error()).To(And(ContainSubstring("runs on a worker cluster"), ContainSubstring("kubectl -n team-a logs -l jobset.sigs.k8s.io/jobset-name="+tj.Name)))
			})

			It("shows the worker cluster a dispatched job ran on, also once Kueue gave it a newer Workload", func(ctx SpecContext) {
				tj := kilntesting.MakeTrainJob(name("ran-on"), "team-a").Queue("team-queue").Suspend(true).ManagedBy(trainer.MultiKueueControllerName).Obj()
				Expect(admin.Create(ctx, tj)).To(Succeed())
				ran := workload(ctx, "team-a", tj.Name, string(tj.UID), "team-queue")
				now := metav1.Now().UTC().Format(time.RFC3339)
				ran.Object["status"] = map[string]any{
					"clusterName": "kiln-worker-1",
					"admission": map[string]any{"clusterQueue": "team-cq", "podSetAssignments": []any{map[string]any{
						"name": "node", "count": int64(2), "flavors": map[string]any{"nvidia.com/gpu": "gpu"}, "resourceUsage": map[string]any{"nvidia.com/gpu": "8"},
					}}},
					"conditions": []any{
						map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved", "lastTransitionTime": now},
						map[string]any{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "admitted", "lastTransitionTime": now},
					},
				}
				Expect(admin.Status().Update(ctx, ran)).To(Succeed())
				status := func(g Gomega) *kilnv1.TrainJobStatus {
					res, err := alice.jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: "team-a", Name: tj.Name}))
					g.Expect(err).NotTo(HaveOccurred())
					return res.Msg.GetTrainJob().GetStatus()
				}
				Eventually(ctx, func(g Gomega) { g.Expect(status(g).GetCluster()).To(Equal("kiln-worker-1")) }).Should(Succeed())

				By("a newer Workload, not dispatched (created a second later: creation times are whole seconds)")
				Eventually(ctx, time.Now).Should(BeTemporally(">=", ran.GetCreationTimestamp().Add(time.Second)))
				newer := pendingWorkload(ctx, "team-a", tj.Name+"-b", string(tj.UID), "team-queue")
				Expect(newer.GetCreationTimestamp().After(ran.GetCreationTimestamp().Time)).To(BeTrue())
				Eventually(ctx, func(g Gomega) {
					st := status(g)
					g.Expect(st.GetMessage()).To(ContainSubstring("insufficient unused quota"), "the view reads the newer Workload")
					g.Expect(st.GetCluster()).To(Equal("kiln-worker-1"))
				}).Should(Succeed())
			})
		})
	}
})

// workload creates the Kueue Workload Kueue would create for a queued job, waiting for
// quota in the ClusterQueue team-cq.
func workload(ctx context.Context, ns, job, uid, queue string) *unstructured.Unstructured {
	GinkgoHelper()
	teamQueue(ctx, ns, queue)
	return pendingWorkload(ctx, ns, job, uid, queue)
}

// teamQueue creates LocalQueue queue in ns, feeding the ClusterQueue team-cq of 8 GPUs.
func teamQueue(ctx context.Context, ns, queue string) {
	GinkgoHelper()
	applyYAML(ctx, `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: `+queue+`, namespace: `+ns+`}
spec: {clusterQueue: team-cq}`)
}

// pendingWorkload creates the Workload Kueue would create for a job queued in queue, whether
// that queue exists or not.
func pendingWorkload(ctx context.Context, ns, job, uid, queue string) *unstructured.Unstructured {
	GinkgoHelper()
	wl := &unstructured.Unstructured{}
	wl.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	wl.SetKind("Workload")
	wl.SetNamespace(ns)
	wl.SetName("trainjob-" + job + "-1a2b3")
	wl.SetLabels(map[string]string{trainer.KueueJobUIDLabel: uid})
	wl.Object["spec"] = map[string]any{
		"queueName": queue,
		"podSets": []any{map[string]any{"name": "node", "count": int64(2), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "node", "image": "img"}},
		}}}},
	}
	Expect(admin.Create(ctx, wl)).To(Succeed())
	wl.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
		"message": "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu, 8 more needed",
	}}}
	Expect(admin.Status().Update(ctx, wl)).To(Succeed())
	return wl
}
