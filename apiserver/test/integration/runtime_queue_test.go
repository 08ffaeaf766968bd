package integration

import (
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/reflect/protoreflect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

var _ = Describe("RuntimeService and QueueService", func() {
	for _, p := range protocols {
		It("lists and gets runtimes for callers who may read them over "+p.name, func(ctx SpecContext) {
			alice := p.as("alice")
			Eventually(ctx, func(g Gomega) {
				res, err := alice.runtimes.ListRuntimes(ctx, connect.NewRequest(&kilnv1.ListRuntimesRequest{Namespace: "team-a"}))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.Msg.GetRuntimes()).NotTo(BeEmpty())
			}).Should(Succeed())
			res, err := alice.runtimes.GetRuntime(ctx, connect.NewRequest(&kilnv1.GetRuntimeRequest{Name: "torch-distributed"}))
			Expect(err).NotTo(HaveOccurred())
			rt := res.Msg.GetRuntime()
			Expect(rt.GetFramework()).To(Equal("torch"))
			Expect(rt.GetImage()).To(HavePrefix("pytorch/pytorch"))
			Expect(rt.GetDevicesPerNode()).To(HaveLen(1))
			Expect(rt.GetRunPolicy().GetActiveDeadlineSeconds()).To(BeEquivalentTo(7200))
			Expect(rt.GetSteps()).To(Equal([]string{"node"}))

			_, err = p.as("carol").runtimes.ListRuntimes(ctx, connect.NewRequest(&kilnv1.ListRuntimesRequest{}))
			Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
			_, err = alice.runtimes.GetRuntime(ctx, connect.NewRequest(&kilnv1.GetRuntimeRequest{Name: "nope"}))
			Expect(connect.CodeOf(err)).To(Equal(connect.CodeNotFound))
		})

		It("lists queues with their quota over "+p.name, func(ctx SpecContext) {
			alice := p.as("alice")
			workload(ctx, "team-a", p.prefix()+"for-queue", "uid-"+strings.TrimSuffix(p.prefix(), "-"), "team-queue")
			Eventually(ctx, func(g Gomega) {
				res, err := alice.queues.ListQueues(ctx, connect.NewRequest(&kilnv1.ListQueuesRequest{Namespace: "team-a"}))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.Msg.GetQueues()).To(HaveLen(1))
				q := res.Msg.GetQueues()[0]
				g.Expect(q.GetClusterQueue()).To(Equal("team-cq"))
				g.Expect(q.GetQuota()).To(HaveLen(1))
				g.Expect(q.GetQuota()[0].GetNominal()).To(Equal("8"))
			}).Should(Succeed())
			_, err := alice.queues.ListQueues(ctx, connect.NewRequest(&kilnv1.ListQueuesRequest{Namespace: "team-b"}))
			Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
		})

	}

	It("answers health checks and reflection without a token", func(ctx SpecContext) {
		res, err := httpServer.Client().Post(apiURL+"/grpc.health.v1.Health/Check", "application/json", strings.NewReader(`{"service":"kiln.v1.TrainJobService"}`))
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		Expect(string(body)).To(MatchJSON(`{"status":"SERVING_STATUS_SERVING"}`))

		stream := grpcreflect.NewClient(httpServer.Client(), apiURL, connect.WithGRPC()).NewStream(ctx)
		services, err := stream.ListServices()
		Expect(err).NotTo(HaveOccurred())
		Expect(services).To(ContainElements(protoreflect.FullName("kiln.v1.TrainJobService"), protoreflect.FullName("kiln.v1.QueueService")))
		_, _ = stream.Close()
	})

	It("serves /readyz and /healthz", func(ctx SpecContext) {
		for _, path := range []string{"/healthz", "/readyz"} {
			res, err := httpServer.Client().Get(apiURL + path)
			Expect(err).NotTo(HaveOccurred())
			res.Body.Close()
			Expect(res.StatusCode).To(Equal(http.StatusOK))
		}
	})
})
