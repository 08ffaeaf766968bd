package crontrainjob

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// cronHarness is the CronTrainJob reconciler over a fake client and a fake clock: a
// scheduled time falls due by moving the clock, not by waiting. It counts the status
// writes of each reconcile, and can make the apiserver refuse a write.
type cronHarness struct {
	t      *testing.T
	client client.Client
	clock  *clocktesting.FakePassiveClock
	events *events.FakeRecorder
	r      *Reconciler
	// writes are the status writes of the last reconcile.
	writes int
	// failCreate and failStatus, when set, are what the apiserver answers to a TrainJob's
	// creation and to a CronTrainJob's status write.
	failCreate, failStatus error
}

func newCronHarness(t *testing.T, now time.Time, objs ...client.Object) *cronHarness {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme, kiln.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	h := &cronHarness{t: t, clock: clocktesting.NewFakePassiveClock(now), events: events.NewFakeRecorder(100)}
	h.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&kiln.CronTrainJob{}, &trainer.TrainJob{}).Build()
	c := interceptor.NewClient(h.client.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*trainer.TrainJob); ok && h.failCreate != nil {
				return h.failCreate
			}
			return c.Create(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*kiln.CronTrainJob); ok && sub == "status" {
				h.writes++
				if h.failStatus != nil {
					return h.failStatus
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*kiln.CronTrainJob); ok {
				h.writes++
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	h.r = NewReconciler(c, h.events, h.clock)
	return h
}

// reconcileErr runs one reconcile at time now, counting its status writes.
func (h *cronHarness) reconcileErr(cj *kiln.CronTrainJob, now time.Time) (reconcile.Result, error) {
	h.clock.SetTime(now)
	h.writes = 0
	return h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cj)})
}

func (h *cronHarness) reconcile(cj *kiln.CronTrainJob, now time.Time) reconcile.Result {
	h.t.Helper()
	res, err := h.reconcileErr(cj, now)
	if err != nil {
		h.t.Fatalf("Reconcile at %s: %v", now.Format(time.RFC3339), err)
	}
	return res
}

func (h *cronHarness) cronTrainJob(cj *kiln.CronTrainJob) *kiln.CronTrainJob {
	h.t.Helper()
	got := &kiln.CronTrainJob{}
	if err := h.client.Get(context.Background(), client.ObjectKeyFromObject(cj), got); err != nil {
		h.t.Fatalf("reading CronTrainJob: %v", err)
	}
	return got
}

// runNames are the names of the TrainJobs there are, sorted.
func (h *cronHarness) runNames() []string {
	h.t.Helper()
	list := &trainer.TrainJobList{}
	if err := h.client.List(context.Background(), list); err != nil {
		h.t.Fatalf("listing TrainJobs: %v", err)
	}
	var out []string
	for _, tj := range list.Items {
		out = append(out, tj.Name)
	}
	return out
}

// recorded drains the events recorded so far, as "<type> <reason>".
func (h *cronHarness) recorded() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			f := strings.Fields(e)
			out = append(out, f[0]+" "+f[1])
		default:
			return out
		}
	}
}

// cronReady is the CronTrainJob's Ready condition as "<status>/<reason>: <message>".
func cronReady(cj *kiln.CronTrainJob) string {
	c := meta.FindStatusCondition(cj.Status.Conditions, CronConditionReady)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}

// activeNames are the names of the runs the status lists as active.
func activeNames(cj *kiln.CronTrainJob) []string {
	var out []string
	for _, ref := range cj.Status.Active {
		out = append(out, ref.Name)
	}
	return out
}

// finishedAt marks a run complete (or failed) at t.
func finishedAt(w *kilntesting.TrainJobWrapper, complete bool, t time.Time) *trainer.TrainJob {
	typ, reason := trainer.TrainJobComplete, "AllJobsCompleted"
	if !complete {
		typ, reason = trainer.TrainJobFailed, "FailedJobs"
	}
	tj := w.Condition(typ, metav1.ConditionTrue, reason, "done").CompletionTime(t).Obj()
	tj.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t)
	return tj
}

// t0 is the tests' reference instant: Monday 2026-11-23, 10:00 UTC.
var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

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

// hourly is a CronTrainJob running at every full hour, created at t0 (10:00 UTC).
var hourly = kilntesting.MakeCronTrainJob("hourly", "ns").Created(t0)

func TestCronReconcileCreatesTheDueRun(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// t0 is Monday 2026-11-23; the first Sunday 02:00 in Berlin after it is 01:00 UTC.
	sunday := time.Date(2026, 11, 29, 2, 0, 0, 0, berlin)
	for name, tc := range map[string]struct {
		cj        *kiln.CronTrainJob
		now       time.Time
		wantRuns  []string
		wantLast  *metav1.Time
		wantReady string
		wantAfter time.Duration
	}{
		"before the first scheduled time: nothing": {
			cj:        hourly.Clone().Obj(),
			now:       t0.Add(30 * time.Minute),
			wantReady: "True/Scheduled: next run at 2026-11-23T11:00:00Z",
			wantAfter: 30*time.Minute + scheduleSlack,
		},
		"the first scheduled time: its run": {
			cj:        hourly.Clone().Obj(),
			now:       t0.Add(time.Hour + 30*time.Second),
			wantRuns:  []string{kiln.RunName("hourly", t0.Add(time.Hour))},
			wantLast:  ptr.To(metav1.NewTime(t0.Add(time.Hour))),
			wantReady: "True/Scheduled: next run at 2026-11-23T12:00:00Z",
			wantAfter: 59*time.Minute + 30*time.Second + scheduleSlack,
		},
		"in its time zone": {
			cj:        kilntesting.MakeCronTrainJob("weekly", "ns").Schedule("0 2 * * 0").TimeZone("Europe/Berlin").Created(t0).Obj(),
			now:       sunday.Add(30 * time.Second),
			wantRuns:  []string{"weekly-29931900"},
			wantLast:  ptr.To(metav1.NewTime(sunday)),
			wantReady: "True/Scheduled: next run at 2026-12-06T01:00:00Z",
			wantAfter: 7*24*time.Hour - 30*time.Second + scheduleSlack,
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newCronHarness(t, tc.now, tc.cj)
			res := h.reconcile(tc.cj, tc.now)
			if diff := cmp.Diff(reconcile.Result{RequeueAfter: tc.wantAfter}, res); diff != "" {
				t.Errorf("result: requeued at the next scheduled time (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRuns, h.runNames()); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			got := h.cronTrainJob(tc.cj)
			if diff := cmp.Diff(tc.wantLast, got.Status.LastScheduleTime); diff != "" {
				t.Errorf("lastScheduleTime (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRuns, activeNames(got)); diff != "" {
				t.Errorf("active (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReady, cronReady(got)); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			var wantEvents []string
			if len(tc.wantRuns) > 0 {
				wantEvents = []string{"Normal " + ReasonSuccessfulCreate}
			}
			if diff := cmp.Diff(wantEvents, h.recorded()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if h.writes != 1 {
				t.Errorf("%d status writes, want 1", h.writes)
			}
		})
	}
}

func TestCronReconcileRunIsTheTemplateToldItsTime(t *testing.T) {
	cj := hourly.Clone().Env("DATA", "s3://bucket").Obj()
	cj.Spec.TrainJobTemplate.Labels = map[string]string{"team": "search"}
	due := t0.Add(time.Hour)
	h := newCronHarness(t, due, cj)
	h.reconcile(cj, due.Add(30*time.Second))

	got := &trainer.TrainJob{}
	if err := h.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: kiln.RunName("hourly", due)}, got); err != nil {
		t.Fatalf("the run: %v", err)
	}
	if !metav1.IsControlledBy(got, cj) {
		t.Error("the run is not controlled by its CronTrainJob")
	}
	stamp := due.UTC().Format(time.RFC3339)
	if diff := cmp.Diff(map[string]string{"team": "search", kiln.LabelCronTrainJob: "hourly"}, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{kiln.AnnotationScheduledTime: stamp}, got.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	wantEnv := []corev1.EnvVar{{Name: "DATA", Value: "s3://bucket"}, {Name: kiln.EnvScheduledTime, Value: stamp}}
	if diff := cmp.Diff(wantEnv, got.Spec.Trainer.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestCronReconcileWritesStatusOnlyWhenItChanges(t *testing.T) {
	cj := hourly.Clone().Obj()
	h := newCronHarness(t, t0, cj)
	// Steps in order, each from the state the one before left.
	steps := []struct {
		now        time.Time
		wantWrites int
	}{
		{t0.Add(time.Minute), 1},
		{t0.Add(2 * time.Minute), 0},
		{t0.Add(time.Hour), 1},
		{t0.Add(time.Hour + time.Minute), 0},
	}
	for i, s := range steps {
		h.reconcile(cj, s.now)
		if h.writes != s.wantWrites {
			t.Errorf("step %d at %s: %d status writes, want %d", i, s.now.Format(time.TimeOnly), h.writes, s.wantWrites)
		}
	}
}

func TestCronReconcileLostStatusWrite(t *testing.T) {
	cj := hourly.Clone().Obj()
	due := t0.Add(time.Hour)
	h := newCronHarness(t, due, cj)
	h.failStatus = apierrors.NewConflict(schema.GroupResource{Group: kiln.GroupVersion.Group, Resource: "crontrainjobs"}, "hourly", nil)
	if _, err := h.reconcileErr(cj, due); err == nil {
		t.Fatal("Reconcile returned no error when its status write failed")
	}
	// The run was created, and says so; the status does not yet.
	if diff := cmp.Diff([]string{"Normal " + ReasonSuccessfulCreate}, h.recorded()); diff != "" {
		t.Errorf("events of a reconcile whose status write failed (-want +got):\n%s", diff)
	}
	if got := h.cronTrainJob(cj).Status.LastScheduleTime; got != nil {
		t.Errorf("lastScheduleTime %v stored by a failed write", got)
	}

	// The retry finds the run by its name: no second run, no second event.
	h.failStatus = nil
	h.reconcile(cj, due.Add(time.Second))
	if diff := cmp.Diff([]string{kiln.RunName("hourly", due)}, h.runNames()); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	got := h.cronTrainJob(cj)
	if diff := cmp.Diff(ptr.To(metav1.NewTime(due)), got.Status.LastScheduleTime); diff != "" {
		t.Errorf("lastScheduleTime (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{kiln.RunName("hourly", due)}, activeNames(got)); diff != "" {
		t.Errorf("active (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string(nil), h.recorded()); diff != "" {
		t.Errorf("events of the retry (-want +got):\n%s", diff)
	}
}

func TestCronReconcileGoneOrGoing(t *testing.T) {
	going := hourly.Clone().Obj()
	going.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	going.Finalizers = []string{"test.kiln.dev/hold"}
	for name, tc := range map[string]struct {
		objs []client.Object
		// wantForgotten: the due instants counted for it are forgotten.
		wantForgotten bool
	}{
		"deleted":       {wantForgotten: true},
		"being deleted": {objs: []client.Object{going}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newCronHarness(t, t0, tc.objs...)
			key := types.NamespacedName{Namespace: "ns", Name: "hourly"}
			h.r.missed.first(key, t0)
			h.r.skipped.first(key, t0)
			res := h.reconcile(hourly.Obj(), t0.Add(2*time.Hour))
			if diff := cmp.Diff(reconcile.Result{}, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if runs := h.runNames(); len(runs) != 0 {
				t.Errorf("runs %v created", runs)
			}
			if h.writes != 0 {
				t.Errorf("%d status writes, want none", h.writes)
			}
			_, missed := h.r.missed.m[key]
			_, skipped := h.r.skipped.m[key]
			if diff := cmp.Diff([2]bool{!tc.wantForgotten, !tc.wantForgotten}, [2]bool{missed, skipped}); diff != "" {
				t.Errorf("due instants remembered, missed and skipped (-want +got):\n%s", diff)
			}
		})
	}
}
