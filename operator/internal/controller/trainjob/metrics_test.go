package trainjob

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// histogram reads a histogram child's sample count and sum.
func histogram(t *testing.T, o prometheus.Observer) (uint64, float64) {
	t.Helper()
	m := &dto.Metric{}
	if err := o.(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// counters snapshots counter values, so that a test checks what it added to the
// process-wide metrics.
type counters map[string]prometheus.Collector

func (c counters) read() map[string]float64 {
	out := map[string]float64{}
	for k, col := range c {
		out[k] = testutil.ToFloat64(col)
	}
	return out
}

// A queued job's whole life moves the metrics once per step: queued, admitted after 30 s
// (the queued time), its pods ready 4 s later (the startup time), the deadline fired 2 s
// late, the TTL deletion 3 s late (the pods' readiness is a transition, stored at once).
// Reconciles that change nothing count nothing.
func TestMetricsFollowALifecycle(t *testing.T) {
	const rt = "torch-distributed"
	// The conditions' transition times are the wall clock's (meta.SetStatusCondition), so
	// the fake clock starts at it.
	start := time.Now().Truncate(time.Second)
	tj := kilntesting.MakeTrainJob("metrics", "ns").Queue("default").Suspend(true).ActiveDeadlineSeconds(60).TTLSecondsAfterFinished(30).Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())
	h.clock.SetTime(start)
	c := counters{
		"queued":    stateTransitions.WithLabelValues(StateQueued, rt),
		"starting":  stateTransitions.WithLabelValues(StateStarting, rt),
		"running":   stateTransitions.WithLabelValues(StateRunning, rt),
		"failed":    stateTransitions.WithLabelValues(StateFailed, rt),
		"deadlines": deadlinesExceeded.WithLabelValues(rt),
		"ttl":       ttlDeletions.WithLabelValues(rt),
	}
	was := c.read()
	added := func(step string, want map[string]float64) {
		t.Helper()
		now := c.read()
		for k := range c {
			if got := now[k] - was[k]; got != want[k] {
				t.Errorf("%s: %s went up by %g, want %g", step, k, got, want[k])
			}
		}
		was = now
	}
	queuedN, queuedSum := histogram(t, queued.WithLabelValues(rt))
	startupN, startupSum := histogram(t, startup.WithLabelValues(rt))
	deadlineN, deadlineSum := histogram(t, timerLag.WithLabelValues(TimerDeadline))
	ttlN, ttlSum := histogram(t, timerLag.WithLabelValues(TimerTTL))

	h.reconcile(tj)
	h.reconcile(tj)
	added("queued", map[string]float64{"queued": 1})

	h.clock.SetTime(start.Add(30 * time.Second))
	got := h.trainJob(tj)
	got.Spec.Suspend = ptr.To(false)
	if err := h.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	h.reconcile(tj)
	added("admitted", map[string]float64{"starting": 1})
	if n, sum := histogram(t, queued.WithLabelValues(rt)); n != queuedN+1 || math.Abs(sum-queuedSum-30) > 1.5 {
		t.Errorf("queued time: %d samples adding %gs, want 1 of about 30s", n-queuedN, sum-queuedSum)
	}

	h.clock.SetTime(start.Add(34 * time.Second))
	js := h.jobSet(tj)
	js.Status.ReplicatedJobsStatus = kilntesting.MakeJobSet(tj).ReplicatedJobStatus("node", 1, 0, 0, 1, 0).Status.ReplicatedJobsStatus
	if err := h.client.Status().Update(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	h.recorded()
	h.reconcile(tj) // its pods now ready: a transition, stored at once
	h.reconcile(tj)
	added("running", map[string]float64{"running": 1})
	if diff := cmp.Diff([]string{"Normal " + ReasonRunning}, h.recorded()); diff != "" {
		t.Errorf("events once the pods are ready (-want +got):\n%s", diff)
	}
	if n, sum := histogram(t, startup.WithLabelValues(rt)); n != startupN+1 || math.Abs(sum-startupSum-4) > 0.001 {
		t.Errorf("startup time: %d samples adding %gs, want 1 of 4s (admitted at 30s, stored ready at 34s)", n-startupN, sum-startupSum)
	}

	// startTime is the admission, truncated to the second: the deadline is due at 90 s.
	h.clock.SetTime(start.Add(92 * time.Second))
	h.reconcile(tj)
	h.reconcile(tj) // deletes the JobSet
	added("deadline", map[string]float64{"failed": 1, "deadlines": 1})
	if n, sum := histogram(t, timerLag.WithLabelValues(TimerDeadline)); n != deadlineN+1 || math.Abs(sum-deadlineSum-2) > 0.001 {
		t.Errorf("deadline lag: %d samples adding %gs, want 1 of 2s", n-deadlineN, sum-deadlineSum)
	}

	// completionTime is when the deadline fired (92 s): the TTL is due at 122 s.
	h.clock.SetTime(start.Add(125 * time.Second))
	h.reconcile(tj)
	added("ttl", map[string]float64{"ttl": 1})
	if n, sum := histogram(t, timerLag.WithLabelValues(TimerTTL)); n != ttlN+1 || math.Abs(sum-ttlSum-3) > 0.001 {
		t.Errorf("TTL lag: %d samples adding %gs, want 1 of 3s", n-ttlN, sum-ttlSum)
	}
}

func TestMetricsCountJobSetErrors(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").Obj()
	h := newHarness(t, tj)
	was := testutil.ToFloat64(jobSetErrors.WithLabelValues(errorRuntimeNotFound))
	h.reconcile(tj)
	if got := testutil.ToFloat64(jobSetErrors.WithLabelValues(errorRuntimeNotFound)) - was; got != 1 {
		t.Errorf("runtime_not_found errors went up by %g, want 1", got)
	}
}

func TestObserveWriteCountsRestartsByBudget(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").Obj()
	before := &trainer.TrainJobStatus{Restarts: &trainer.RestartsStatus{Count: 1, CountedTowardsMax: 1}}
	after := &trainer.TrainJobStatus{Restarts: &trainer.RestartsStatus{Count: 3, CountedTowardsMax: 2, LastReason: "Disruption"}}
	counted, free := restarts.WithLabelValues("Disruption", "true"), restarts.WithLabelValues("Disruption", "false")
	c0, f0 := testutil.ToFloat64(counted), testutil.ToFloat64(free)
	observeWrite(tj, before, after, lifecycleActions{}, time.Now())
	observeWrite(tj, after, after, lifecycleActions{}, time.Now())
	if c, f := testutil.ToFloat64(counted)-c0, testutil.ToFloat64(free)-f0; c != 1 || f != 1 {
		t.Errorf("restarts counted %g, not counted %g; want 1 and 1", c, f)
	}
}

func TestJobState(t *testing.T) {
	ready := []trainer.JobStatus{{Name: "node", Ready: ptr.To[int32](1)}}
	for _, tc := range []struct {
		name string
		tj   *trainer.TrainJob
		want string
	}{
		{"new", kilntesting.MakeTrainJob("j", "ns").Obj(), ""},
		{"queued", kilntesting.MakeTrainJob("j", "ns").Queue("q").Condition(trainer.TrainJobSuspended, metav1.ConditionTrue, "Suspended", "").Obj(), StateQueued},
		{"suspended", kilntesting.MakeTrainJob("j", "ns").Condition(trainer.TrainJobSuspended, metav1.ConditionTrue, "Suspended", "").Obj(), StateSuspended},
		{"starting", kilntesting.MakeTrainJob("j", "ns").StartTime(t0).Obj(), StateStarting},
		{"resumed", kilntesting.MakeTrainJob("j", "ns").Condition(trainer.TrainJobSuspended, metav1.ConditionFalse, "Resumed", "").Obj(), StateStarting},
		{"running", withJobs(kilntesting.MakeTrainJob("j", "ns").StartTime(t0).Obj(), ready), StateRunning},
		{"complete", kilntesting.MakeTrainJob("j", "ns").Condition(trainer.TrainJobComplete, metav1.ConditionTrue, "Done", "").Obj(), StateComplete},
		{"failed", kilntesting.MakeTrainJob("j", "ns").Condition(trainer.TrainJobFailed, metav1.ConditionTrue, "DeadlineExceeded", "").Obj(), StateFailed},
	} {
		if got := jobState(tc.tj, &tc.tj.Status); got != tc.want {
			t.Errorf("%s: state %q, want %q", tc.name, got, tc.want)
		}
	}
}

func withJobs(tj *trainer.TrainJob, jobs []trainer.JobStatus) *trainer.TrainJob {
	tj.Status.JobsStatus = jobs
	return tj
}

// kiln_trainjobs is read from the cache at each scrape, by the leader: every state of every
// runtime that has jobs, zeros included; jobs another controller manages are not Kiln's.
func TestStateCollector(t *testing.T) {
	h := newHarness(t,
		kilntesting.MakeTrainJob("a", "ns").Queue("q").Condition(trainer.TrainJobSuspended, metav1.ConditionTrue, "Suspended", "").Obj(),
		kilntesting.MakeTrainJob("b", "ns").Queue("q").Condition(trainer.TrainJobSuspended, metav1.ConditionTrue, "Suspended", "").Obj(),
		withJobs(kilntesting.MakeTrainJob("c", "other").StartTime(t0).Obj(), []trainer.JobStatus{{Name: "node", Ready: ptr.To[int32](2)}}),
		kilntesting.MakeTrainJob("d", "ns").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "deepspeed").Condition(trainer.TrainJobComplete, metav1.ConditionTrue, "Done", "").Obj(),
		kilntesting.MakeTrainJob("e", "ns").ManagedBy("example.com/other").Obj(),
	)
	want := `
# HELP kiln_trainjobs TrainJobs managed by Kiln, by state and runtime (computed from the operator's cache at each scrape).
# TYPE kiln_trainjobs gauge
kiln_trainjobs{runtime="deepspeed",state="complete"} 1
kiln_trainjobs{runtime="deepspeed",state="failed"} 0
kiln_trainjobs{runtime="deepspeed",state="queued"} 0
kiln_trainjobs{runtime="deepspeed",state="running"} 0
kiln_trainjobs{runtime="deepspeed",state="starting"} 0
kiln_trainjobs{runtime="deepspeed",state="suspended"} 0
kiln_trainjobs{runtime="torch-distributed",state="complete"} 0
kiln_trainjobs{runtime="torch-distributed",state="failed"} 0
kiln_trainjobs{runtime="torch-distributed",state="queued"} 2
kiln_trainjobs{runtime="torch-distributed",state="running"} 1
kiln_trainjobs{runtime="torch-distributed",state="starting"} 0
kiln_trainjobs{runtime="torch-distributed",state="suspended"} 0
`
	if err := testutil.CollectAndCompare(stateCollector{reader: h.client}, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// A standby replica reports nothing until it leads.
	elected := make(chan struct{})
	if n := testutil.CollectAndCount(stateCollector{reader: h.client, elected: elected}); n != 0 {
		t.Errorf("a standby reports %d series", n)
	}
	close(elected)
	if n := testutil.CollectAndCount(stateCollector{reader: h.client, elected: elected}); n != 12 {
		t.Errorf("the leader reports %d series, want 12", n)
	}
}

// The metric names and help texts follow Prometheus' conventions (promlint).
func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(counted...)
	// Every vector needs a child to be gathered.
	stateTransitions.WithLabelValues(StateRunning, "x")
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
