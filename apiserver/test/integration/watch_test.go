package integration

import (
	"context"
	"time"

	"connectrpc.com/connect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// received is one message of a watch stream, or its end.
type received struct {
	msg *kilnv1.WatchTrainJobsResponse
	err error
}

// watchStream receives a WatchTrainJobs stream in the background.
func watchStream(ctx context.Context, c clients, req *kilnv1.WatchTrainJobsRequest) (<-chan received, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan received, 1000)
	stream, err := c.jobs.WatchTrainJobs(ctx, connect.NewRequest(req))
	go func() {
		defer close(out)
		if err != nil {
			out <- received{err: err}
			return
		}
		for stream.Receive() {
			out <- received{msg: stream.Msg()}
		}
		out <- received{err: stream.Err()}
	}()
	return out, cancel
}

// next returns the next event that is not a heartbeat.
func next(ctx context.Context, ch <-chan received) *kilnv1.WatchTrainJobsResponse {
	GinkgoHelper()
	for {
		select {
		case r, ok := <-ch:
			Expect(ok).To(BeTrue(), "the stream ended")
			Expect(r.err).NotTo(HaveOccurred())
			Expect(r.msg).NotTo(BeNil(), "the stream ended")
			if r.msg.GetType() != kilnv1.WatchEventType_WATCH_EVENT_TYPE_HEARTBEAT {
				return r.msg
			}
		case <-time.After(15 * time.Second):
			Fail("no watch event within 15s")
		case <-ctx.Done():
			Fail("spec ended")
		}
	}
}

var _ = Describe("WatchTrainJobs", func() {
	for _, p := range protocols {
		It("streams the current state, then changes, and resumes after a dropped stream over "+p.name, func(ctx SpecContext) {
			alice := p.as("alice")
			name := p.prefix() + "watched"
			create(ctx, alice, "team-a", newJob(name))
			ch, stop := watchStream(ctx, alice, &kilnv1.WatchTrainJobsRequest{Namespace: "team-a", Name: name})
			ev := next(ctx, ch)
			Expect(ev.GetType()).To(Equal(kilnv1.WatchEventType_WATCH_EVENT_TYPE_ADDED))
			Expect(ev.GetTrainJob().GetName()).To(Equal(name))
			Expect(next(ctx, ch).GetType()).To(Equal(kilnv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED))

			tj, err := adminTrainJob(ctx, "team-a", name)
			Expect(err).NotTo(HaveOccurred())
			tj.Labels = map[string]string{"step": "1"}
			Expect(admin.Update(ctx, tj)).To(Succeed())
			ev = next(ctx, ch)
			Expect(ev.GetType()).To(Equal(kilnv1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED))
			Expect(ev.GetTrainJob().GetLabels()).To(HaveKeyWithValue("step", "1"))
			resumeFrom := ev.GetResourceVersion()

			// The stream drops; the job changes meanwhile; a new stream resumes exactly after.
			stop()
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(tj), tj)).To(Succeed())
			tj.Labels["step"] = "2"
			Expect(admin.Update(ctx, tj)).To(Succeed())
			ch, stop = watchStream(ctx, alice, &kilnv1.WatchTrainJobsRequest{Namespace: "team-a", Name: name, ResourceVersion: resumeFrom})
			defer stop()
			ev = next(ctx, ch)
			Expect(ev.GetType()).To(Equal(kilnv1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED), "no replay of the state before the version")
			Expect(ev.GetTrainJob().GetLabels()).To(HaveKeyWithValue("step", "2"))

			_, err = alice.jobs.DeleteTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteTrainJobRequest{Namespace: "team-a", Name: name}))
			Expect(err).NotTo(HaveOccurred())
			Expect(next(ctx, ch).GetType()).To(Equal(kilnv1.WatchEventType_WATCH_EVENT_TYPE_DELETED))
		})

		It("starts over with the current state when the version is too old, and beats over "+p.name, func(ctx SpecContext) {
			alice := p.as("alice")
			name := p.prefix() + "resynced"
			create(ctx, alice, "team-a", newJob(name))
			ch, stop := watchStream(ctx, alice, &kilnv1.WatchTrainJobsRequest{Namespace: "team-a", Name: name, ResourceVersion: "1", HeartbeatSeconds: 1})
			defer stop()
			ev := next(ctx, ch)
			Expect(ev.GetType()).To(Equal(kilnv1.WatchEventType_WATCH_EVENT_TYPE_ADDED))
			Expect(next(ctx, ch).GetType()).To(Equal(kilnv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED))
			// With nothing changing, the next message within a few seconds is a heartbeat.
			select {
			case r := <-ch:
				Expect(r.err).NotTo(HaveOccurred())
				Expect(r.msg.GetType()).To(Equal(kilnv1.WatchEventType_WATCH_EVENT_TYPE_HEARTBEAT))
			case <-time.After(5 * time.Second):
				Fail("no heartbeat within 5s of a 1s heartbeat period")
			}
		})
	}
})
