package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"connectrpc.com/connect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/kiln-ml/kiln/api/clientconfig"
	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
)

// apiClient reaches Kiln's API server as the user of the client configuration `make up`
// wrote (KILN_CONFIG, else bin/platform/kiln/config.yaml under KILN_ROOT).
func apiClient(opts ...connect.ClientOption) (kilnv1connect.TrainJobServiceClient, kilnv1connect.QueueServiceClient, clientconfig.Context) {
	GinkgoHelper()
	path := os.Getenv(clientconfig.EnvConfig)
	if path == "" && os.Getenv("KILN_ROOT") != "" {
		path = filepath.Join(os.Getenv("KILN_ROOT"), "bin", "platform", "kiln", "config.yaml")
	}
	if path == "" {
		Skip("no Kiln client configuration: set KILN_CONFIG (make test-e2e does)")
	}
	cfg, err := clientconfig.Load(path)
	Expect(err).NotTo(HaveOccurred())
	kc, err := cfg.Resolve()
	Expect(err).NotTo(HaveOccurred())
	hc, err := kc.AuthenticatedClient()
	Expect(err).NotTo(HaveOccurred())
	return kilnv1connect.NewTrainJobServiceClient(hc, kc.Server, opts...), kilnv1connect.NewQueueServiceClient(hc, kc.Server, opts...), kc
}

var _ = Describe("Kiln API server", Label(chartMode), func() {
	It("runs a queued job through the API only: queued, running, complete, with its logs followed", func(ctx SpecContext) {
		jobs, queues, kc := apiClient(connect.WithGRPC())
		ns := kc.Namespace
		name := "api-e2e"
		DeferCleanup(func(ctx context.Context) {
			_, _ = jobs.DeleteTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteTrainJobRequest{Namespace: ns, Name: name}))
		})

		// Follow every state change from before the job exists.
		stream, err := jobs.WatchTrainJobs(ctx, connect.NewRequest(&kilnv1.WatchTrainJobsRequest{Namespace: ns, Name: name}))
		Expect(err).NotTo(HaveOccurred())
		var (
			mu     sync.Mutex
			states []kilnv1.State
		)
		go func() {
			defer GinkgoRecover()
			for stream.Receive() {
				if st := stream.Msg().GetTrainJob().GetStatus().GetState(); st != kilnv1.State_STATE_UNSPECIFIED {
					mu.Lock()
					if len(states) == 0 || states[len(states)-1] != st {
						states = append(states, st)
					}
					mu.Unlock()
				}
			}
		}()

		created, err := jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{
			Namespace: ns, RequestId: "api-e2e",
			Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: &kilnv1.NewTrainJob{Name: name, Spec: &kilnv1.TrainJobSpec{
				Runtime: "torch-distributed", Image: "docker.io/my-training-image:latest", Command: []string{"torchrun", "train.py"},
				Nodes: 2, ResourcesPerNode: &kilnv1.Resources{Limits: map[string]string{"nvidia.com/gpu": "8"}},
				Queue: "default", ActiveDeadlineSeconds: ptrInt64(600), TtlSecondsAfterFinished: ptrInt32(3600),
			}}},
		}))
		Expect(err).NotTo(HaveOccurred())
		Expect(created.Msg.GetTrainJob().GetSpec().GetQueue()).To(Equal("default"))

		// Follow the logs from the start: the stream waits for the steps, then ends
		// when the job finished.
		logs, err := jobs.StreamLogs(ctx, connect.NewRequest(&kilnv1.StreamLogsRequest{Namespace: ns, Name: name, Follow: true}))
		Expect(err).NotTo(HaveOccurred())
		lines := map[string][]string{}
		for logs.Receive() {
			for _, l := range logs.Msg().GetLines() {
				lines[l.GetStep()] = append(lines[l.GetStep()], l.GetText())
			}
		}
		Expect(logs.Err()).NotTo(HaveOccurred())
		Expect(lines).To(HaveKey("node-0"))
		Expect(lines).To(HaveKey("node-1"))
		Expect(strings.Join(lines["node-1"], "\n")).To(ContainSubstring("training complete"))

		var got *kilnv1.TrainJob
		Eventually(ctx, func(g Gomega) {
			res, err := jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: ns, Name: name}))
			g.Expect(err).NotTo(HaveOccurred())
			got = res.Msg.GetTrainJob()
			g.Expect(got.GetStatus().GetState()).To(Equal(kilnv1.State_STATE_COMPLETE))
		}).Should(Succeed())
		st := got.GetStatus()
		Expect(st.GetSteps()).To(HaveLen(2))
		for _, step := range st.GetSteps() {
			Expect(step.GetPhase()).To(Equal("Succeeded"))
			Expect(step.GetNode()).To(HavePrefix("kwok-"))
			Expect(step.GetDevices()).To(ConsistOf(HaveField("Count", BeEquivalentTo(8))))
		}
		Expect(st.GetStatus()).To(Equal("Complete"), "in the Kubeflow SDK's words")
		for statuses, want := range map[string]int{"Complete": 1, "Created,Running,Failed": 0} {
			res, err := jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: ns, Statuses: strings.Split(statuses, ",")}))
			Expect(err).NotTo(HaveOccurred())
			n := 0
			for _, j := range res.Msg.GetTrainJobs() {
				Expect(strings.Split(statuses, ",")).To(ContainElement(j.GetStatus().GetStatus()), "job %s listed for statuses %s", j.GetName(), statuses)
				if j.GetName() == name {
					n++
				}
			}
			Expect(n).To(Equal(want), "statuses %s", statuses)
		}
		Expect(st.GetStartTime()).NotTo(BeNil())
		Expect(st.GetCompletionTime()).NotTo(BeNil())
		Expect(st.GetTtlDeleteTime().AsTime()).To(BeTemporally("==", st.GetCompletionTime().AsTime().Add(3600e9)))
		Eventually(func() []kilnv1.State {
			mu.Lock()
			defer mu.Unlock()
			return append([]kilnv1.State(nil), states...)
		}).Should(Equal([]kilnv1.State{kilnv1.State_STATE_QUEUED, kilnv1.State_STATE_RUNNING, kilnv1.State_STATE_COMPLETE}))

		evs, err := jobs.ListEvents(ctx, connect.NewRequest(&kilnv1.ListEventsRequest{Namespace: ns, Name: name}))
		Expect(err).NotTo(HaveOccurred())
		var reasons []string
		for _, e := range evs.Msg.GetEvents() {
			if e.GetObject() == "TrainJob/"+name {
				reasons = append(reasons, e.GetReason())
			}
		}
		// A queued job: Kueue's events tell its queueing and admission, the operator's the rest
		// (and not the same transitions again).
		Expect(reasons).To(ContainElements("CreatedWorkload", "Started", "Created", "Completed"))
		Expect(reasons).NotTo(ContainElement(BeElementOf("Suspended", "Resumed")))

		qs, err := queues.ListQueues(ctx, connect.NewRequest(&kilnv1.ListQueuesRequest{Namespace: ns}))
		Expect(err).NotTo(HaveOccurred())
		Expect(qs.Msg.GetQueues()).To(ContainElement(HaveField("ClusterQueue", "cluster-queue")))

		_, err = jobs.DeleteTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteTrainJobRequest{Namespace: ns, Name: name}))
		Expect(err).NotTo(HaveOccurred())
	})

	It("refuses a caller without a token, and a user outside their namespace", func(ctx SpecContext) {
		_, _, kc := apiClient()
		hc, err := kc.HTTPClient()
		Expect(err).NotTo(HaveOccurred())
		anon := kilnv1connect.NewTrainJobServiceClient(hc, kc.Server)
		_, err = anon.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: kc.Namespace}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodeUnauthenticated))

		jobs, _, _ := apiClient()
		_, err = jobs.ListTrainJobs(ctx, connect.NewRequest(&kilnv1.ListTrainJobsRequest{Namespace: "kube-system"}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))

		res, err := hc.Get(kc.Server + "/readyz")
		Expect(err).NotTo(HaveOccurred())
		res.Body.Close()
		Expect(res.StatusCode).To(Equal(http.StatusOK))
	})
})

func ptrInt64(v int64) *int64 { return &v }
func ptrInt32(v int32) *int32 { return &v }
