package integration

import (
	"time"

	"connectrpc.com/connect"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func newCron(name string) *kilnv1.NewCronTrainJob {
	return &kilnv1.NewCronTrainJob{Name: name, Labels: map[string]string{"team": "nlp"}, Spec: &kilnv1.CronTrainJobSpec{
		Schedule: "0 2 * * 0", TimeZone: "Europe/Berlin", ConcurrencyPolicy: kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID,
		StartingDeadlineSeconds: ptr.To[int64](3600), SuccessfulJobsHistoryLimit: ptr.To[int32](2), FailedJobsHistoryLimit: ptr.To[int32](0),
		TrainJob: &kilnv1.TrainJobTemplate{Labels: map[string]string{"stage": "retrain"}, Spec: &kilnv1.TrainJobSpec{
			Runtime: "torch-distributed", Image: "docker.io/my-training-image:latest", Command: []string{"torchrun", "train.py"},
			Nodes: 2, Queue: "team-queue", ActiveDeadlineSeconds: ptr.To[int64](12 * 3600),
		}},
	}}
}

func adminCron(ctx SpecContext, ns, name string) (*kiln.CronTrainJob, error) {
	cj := &kiln.CronTrainJob{}
	return cj, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cj)
}

var _ = Describe("CronTrainJobService", func() {
	var alice, bob clients
	BeforeEach(func(ctx SpecContext) {
		// Connect only: the other protocols share every handler with it (see TrainJobService).
		alice, bob = protocols[0].as("alice"), protocols[0].as("bob")
		// The runs' LocalQueue: a schedule whose queue does not exist is refused.
		teamQueue(ctx, "team-a", "team-queue")
	})
	createCron := func(ctx SpecContext, c clients, in *kilnv1.NewCronTrainJob, requestID string) (*kilnv1.CreateCronTrainJobResponse, error) {
		res, err := c.crons.CreateCronTrainJob(ctx, connect.NewRequest(&kilnv1.CreateCronTrainJobRequest{
			Namespace: "team-a", Source: &kilnv1.CreateCronTrainJobRequest_CronTrainJob{CronTrainJob: in}, RequestId: requestID,
		}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}

	It("creates a CronTrainJob from fields as the caller, shows its next run, and replays a retry", func(ctx SpecContext) {
		res, err := createCron(ctx, alice, newCron("weekly"), "req-weekly")
		Expect(err).NotTo(HaveOccurred())
		Expect(res.GetReplayed()).To(BeFalse())
		Expect(res.GetManifest()).To(ContainSubstring("kind: CronTrainJob"))
		got := res.GetCronTrainJob()
		Expect(got.GetSpec().GetConcurrencyPolicy()).To(Equal(kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID))
		Expect(got.GetSpec().GetTrainJob().GetSpec().GetQueue()).To(Equal("team-queue"))
		Expect(got.GetSpec().GetTrainJob().GetSpec().GetActiveDeadlineSeconds()).To(Equal(int64(12 * 3600)))

		stored, err := adminCron(ctx, "team-a", "weekly")
		Expect(err).NotTo(HaveOccurred())
		Expect(stored.Spec.ConcurrencyPolicy).To(Equal(kiln.ForbidConcurrent))
		Expect(stored.Spec.TimeZone).To(Equal(ptr.To("Europe/Berlin")))
		Expect(stored.Spec.TrainJobTemplate.Labels).To(HaveKeyWithValue(trainer.KueueQueueNameLabel, "team-queue"))
		Expect(stored.Spec.TrainJobTemplate.Labels).To(HaveKeyWithValue("stage", "retrain"))
		Expect(stored.Spec.TrainJobTemplate.Spec.RuntimeRef.Name).To(Equal("torch-distributed"))
		Expect(*stored.Spec.TrainJobTemplate.Spec.Trainer.NumNodes).To(Equal(int32(2)))

		// The next run: Sunday 02:00 in Berlin, whatever the day today.
		Eventually(func(g Gomega) {
			r, err := alice.crons.GetCronTrainJob(ctx, connect.NewRequest(&kilnv1.GetCronTrainJobRequest{Namespace: "team-a", Name: "weekly", IncludeManifest: true}))
			g.Expect(err).NotTo(HaveOccurred())
			next := r.Msg.GetCronTrainJob().GetStatus().GetNextScheduleTime()
			g.Expect(next).NotTo(BeNil())
			berlin := next.AsTime().In(mustLoad("Europe/Berlin"))
			g.Expect(berlin.Weekday().String()).To(Equal("Sunday"))
			g.Expect(berlin.Hour()).To(Equal(2))
			g.Expect(r.Msg.GetManifest()).To(ContainSubstring("schedule: 0 2 * * 0"))
		}).Should(Succeed())

		again, err := createCron(ctx, alice, newCron("weekly"), "req-weekly")
		Expect(err).NotTo(HaveOccurred())
		Expect(again.GetReplayed()).To(BeTrue())
		Expect(again.GetCronTrainJob().GetUid()).To(Equal(got.GetUid()))
		other := newCron("weekly")
		other.Spec.Schedule = "@daily"
		_, err = createCron(ctx, alice, other, "req-weekly")
		Expect(connect.CodeOf(err)).To(Equal(connect.CodeFailedPrecondition))
		_, err = createCron(ctx, alice, newCron("weekly"), "req-other")
		Expect(connect.CodeOf(err)).To(Equal(connect.CodeAlreadyExists))

		list, err := alice.crons.ListCronTrainJobs(ctx, connect.NewRequest(&kilnv1.ListCronTrainJobsRequest{Namespace: "team-a", LabelSelector: "team=nlp"}))
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Msg.GetCronTrainJobs()).To(ContainElement(HaveField("Name", "weekly")))
	})

	It("refuses bad input with the field and the fix, and stores nothing", func(ctx SpecContext) {
		for _, tc := range []struct {
			mutate func(*kilnv1.NewCronTrainJob)
			field  string
		}{
			{func(c *kilnv1.NewCronTrainJob) { c.Spec.Schedule = "0 2 * *" }, "cron_train_job.spec.schedule"},
			{func(c *kilnv1.NewCronTrainJob) { c.Spec.Schedule = "@fortnightly" }, "cron_train_job.spec.schedule"},
			{func(c *kilnv1.NewCronTrainJob) { c.Spec.TimeZone = "Mars/Olympus" }, "cron_train_job.spec.time_zone"},
			{func(c *kilnv1.NewCronTrainJob) { c.Spec.ConcurrencyPolicy = 9 }, "cron_train_job.spec.concurrency_policy"},
			{func(c *kilnv1.NewCronTrainJob) { c.Spec.StartingDeadlineSeconds = ptr.To[int64](-1) }, "cron_train_job.spec.starting_deadline_seconds"},
			{func(c *kilnv1.NewCronTrainJob) { c.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](-1) }, "cron_train_job.spec.successful_jobs_history_limit"},
			{func(c *kilnv1.NewCronTrainJob) { c.Spec.TrainJob = nil }, "cron_train_job.spec.train_job.spec"},
			{func(c *kilnv1.NewCronTrainJob) { c.Spec.TrainJob.Spec.Runtime = "no-such-runtime" }, "cron_train_job.spec.train_job.spec.runtime"},
			{func(c *kilnv1.NewCronTrainJob) { c.Spec.TrainJob.Spec.Nodes = -2 }, "cron_train_job.spec.train_job.spec.nodes"},
			{func(c *kilnv1.NewCronTrainJob) { c.Name = "Bad_Name" }, "cron_train_job.name"},
		} {
			in := newCron("refused")
			tc.mutate(in)
			_, err := createCron(ctx, alice, in, "")
			Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument), tc.field)
			Expect(fieldViolations(err)).To(ContainElement(tc.field))
		}
		_, err := alice.crons.CreateCronTrainJob(ctx, connect.NewRequest(&kilnv1.CreateCronTrainJobRequest{
			Source: &kilnv1.CreateCronTrainJobRequest_Manifest{Manifest: "apiVersion: kiln.dev/v1alpha1\nkind: CronTrainJob\nmetadata: {name: refused, namespace: team-a}\n" +
				"spec:\n  schedule: '61 * * * *'\n  trainJobTemplate: {spec: {runtimeRef: {name: torch-distributed}}}\n"},
		}))
		Expect(fieldViolations(err)).To(ContainElement("manifest.spec.schedule"))
		_, err = alice.crons.CreateCronTrainJob(ctx, connect.NewRequest(&kilnv1.CreateCronTrainJobRequest{
			Source: &kilnv1.CreateCronTrainJobRequest_Manifest{Manifest: "apiVersion: kiln.dev/v1alpha1\nkind: CronTrainJob\nmetadata: {name: refused, namespace: team-a}\n" +
				"spec:\n  schedule: '@daily'\n  shedule: oops\n  trainJobTemplate: {spec: {runtimeRef: {name: torch-distributed}}}\n"},
		}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodeInvalidArgument))
		Expect(err.Error()).To(ContainSubstring("shedule"))
		_, err = adminCron(ctx, "team-a", "refused")
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a refused CronTrainJob is not stored")
	})

	It("creates from a manifest, and keeps other teams out", func(ctx SpecContext) {
		res, err := alice.crons.CreateCronTrainJob(ctx, connect.NewRequest(&kilnv1.CreateCronTrainJobRequest{
			Source: &kilnv1.CreateCronTrainJobRequest_Manifest{Manifest: "apiVersion: kiln.dev/v1alpha1\nkind: CronTrainJob\nmetadata: {name: nightly, namespace: team-a}\n" +
				"spec:\n  schedule: '@daily'\n  trainJobTemplate: {spec: {runtimeRef: {name: torch-distributed}}}\n"},
		}))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Msg.GetCronTrainJob().GetSpec().GetSchedule()).To(Equal("@daily"))

		_, err = bob.crons.GetCronTrainJob(ctx, connect.NewRequest(&kilnv1.GetCronTrainJobRequest{Namespace: "team-a", Name: "nightly"}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
		_, err = bob.crons.TriggerCronTrainJob(ctx, connect.NewRequest(&kilnv1.TriggerCronTrainJobRequest{Namespace: "team-a", Name: "nightly"}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
		_, err = bob.crons.ListCronTrainJobs(ctx, connect.NewRequest(&kilnv1.ListCronTrainJobsRequest{Namespace: "team-a"}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodePermissionDenied))
		_, err = alice.crons.GetCronTrainJob(ctx, connect.NewRequest(&kilnv1.GetCronTrainJobRequest{Namespace: "team-a", Name: "missing"}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodeNotFound))
	})

	It("suspends and resumes, triggers a run now, lists runs and deletes", func(ctx SpecContext) {
		_, err := createCron(ctx, alice, newCron("ops"), "")
		Expect(err).NotTo(HaveOccurred())

		s, err := alice.crons.SuspendCronTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendCronTrainJobRequest{Namespace: "team-a", Name: "ops"}))
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Msg.GetCronTrainJob().GetSpec().GetSuspend()).To(BeTrue())
		Expect(s.Msg.GetCronTrainJob().GetStatus().GetNextScheduleTime()).To(BeNil(), "a suspended schedule runs nothing next")
		stored, err := adminCron(ctx, "team-a", "ops")
		Expect(err).NotTo(HaveOccurred())
		Expect(stored.Spec.Suspend).To(Equal(ptr.To(true)))
		// Read your writes: a Get right after the call already shows it suspended.
		got, err := alice.crons.GetCronTrainJob(ctx, connect.NewRequest(&kilnv1.GetCronTrainJobRequest{Namespace: "team-a", Name: "ops"}))
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Msg.GetCronTrainJob().GetSpec().GetSuspend()).To(BeTrue())
		r, err := alice.crons.ResumeCronTrainJob(ctx, connect.NewRequest(&kilnv1.ResumeCronTrainJobRequest{Namespace: "team-a", Name: "ops"}))
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Msg.GetCronTrainJob().GetSpec().GetSuspend()).To(BeFalse())
		Expect(r.Msg.GetCronTrainJob().GetStatus().GetNextScheduleTime()).NotTo(BeNil())
		got, err = alice.crons.GetCronTrainJob(ctx, connect.NewRequest(&kilnv1.GetCronTrainJobRequest{Namespace: "team-a", Name: "ops"}))
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Msg.GetCronTrainJob().GetSpec().GetSuspend()).To(BeFalse())

		t1, err := alice.crons.TriggerCronTrainJob(ctx, connect.NewRequest(&kilnv1.TriggerCronTrainJobRequest{Namespace: "team-a", Name: "ops", RequestId: "trigger-1"}))
		Expect(err).NotTo(HaveOccurred())
		runName := t1.Msg.GetTrainJob().GetName()
		Expect(runName).To(HavePrefix("ops-m"))
		Expect(len(runName)).To(BeNumerically("<=", len("ops")+kiln.RunNameSuffixLength))
		retry, err := alice.crons.TriggerCronTrainJob(ctx, connect.NewRequest(&kilnv1.TriggerCronTrainJobRequest{Namespace: "team-a", Name: "ops", RequestId: "trigger-1"}))
		Expect(err).NotTo(HaveOccurred())
		Expect(retry.Msg.GetReplayed()).To(BeTrue())
		Expect(retry.Msg.GetTrainJob().GetName()).To(Equal(runName))
		t2, err := alice.crons.TriggerCronTrainJob(ctx, connect.NewRequest(&kilnv1.TriggerCronTrainJobRequest{Namespace: "team-a", Name: "ops"}))
		Expect(err).NotTo(HaveOccurred())
		Expect(t2.Msg.GetTrainJob().GetName()).NotTo(Equal(runName))

		run, err := adminTrainJob(ctx, "team-a", runName)
		Expect(err).NotTo(HaveOccurred())
		Expect(run.Labels).To(HaveKeyWithValue(kiln.LabelCronTrainJob, "ops"))
		Expect(run.Labels).To(HaveKeyWithValue(trainer.KueueQueueNameLabel, "team-queue"))
		Expect(run.Annotations).To(HaveKeyWithValue("kiln.dev/triggered-by", "system:serviceaccount:team-a:alice"))
		Expect(metav1.IsControlledBy(run, stored)).To(BeTrue())
		Expect(run.Spec.Trainer.Env).To(ContainElement(HaveField("Name", kiln.EnvScheduledTime)))
		_, ok := kiln.ScheduledTimeOf("ops", runName)
		Expect(ok).To(BeFalse(), "a manual run is never taken for a scheduled one")

		Eventually(func(g Gomega) {
			runs, err := alice.crons.ListCronTrainJobRuns(ctx, connect.NewRequest(&kilnv1.ListCronTrainJobRunsRequest{Namespace: "team-a", Name: "ops"}))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(runs.Msg.GetTrainJobs()).To(HaveLen(2))
		}).Should(Succeed())

		_, err = alice.crons.DeleteCronTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteCronTrainJobRequest{Namespace: "team-a", Name: "ops"}))
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool { _, err := adminCron(ctx, "team-a", "ops"); return apierrors.IsNotFound(err) }).Should(BeTrue())
		_, err = alice.crons.TriggerCronTrainJob(ctx, connect.NewRequest(&kilnv1.TriggerCronTrainJobRequest{Namespace: "team-a", Name: "ops"}))
		Expect(connect.CodeOf(err)).To(Equal(connect.CodeNotFound))
	})
})

func mustLoad(name string) *time.Location {
	GinkgoHelper()
	loc, err := time.LoadLocation(name)
	Expect(err).NotTo(HaveOccurred())
	return loc
}
