package crontrainjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kiln-ml/kiln/api/kiln/schedule"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// invalid is the Ready condition of a CronTrainJob whose schedule or time zone does not parse.
func invalid(t *testing.T, expr, tz string) string {
	t.Helper()
	_, err := schedule.Parse(expr, tz)
	if err == nil {
		t.Fatalf("%q in %q parses", expr, tz)
	}
	return "False/" + ReasonInvalidSchedule + ": spec.schedule or spec.timeZone: " + err.Error()
}

func TestPlanSchedule(t *testing.T) {
	for name, tc := range map[string]struct {
		cj         *kiln.CronTrainJob
		now        time.Time
		wantDue    time.Time
		wantMissed int
		wantAfter  time.Duration
		wantReady  string
		wantEvents []string
	}{
		"nothing due yet": {
			cj: hourly.Clone().Obj(), now: t0.Add(59 * time.Minute),
			wantAfter: time.Minute + scheduleSlack, wantReady: "True/Scheduled: next run at 2026-11-23T11:00:00Z",
		},
		"due": {
			cj: hourly.Clone().Obj(), now: t0.Add(time.Hour),
			wantDue: t0.Add(time.Hour), wantMissed: 1, wantAfter: time.Hour + scheduleSlack, wantReady: "True/Scheduled: next run at 2026-11-23T12:00:00Z",
		},
		"due since the last run, not since creation": {
			cj: hourly.Clone().LastScheduleTime(t0.Add(3 * time.Hour)).Obj(), now: t0.Add(4*time.Hour + time.Minute),
			wantDue: t0.Add(4 * time.Hour), wantMissed: 1, wantAfter: 59*time.Minute + scheduleSlack, wantReady: "True/Scheduled: next run at 2026-11-23T15:00:00Z",
		},
		"missed times: the latest is due": {
			cj: hourly.Clone().Obj(), now: t0.Add(5*time.Hour + 30*time.Minute),
			wantDue: t0.Add(5 * time.Hour), wantMissed: 5, wantAfter: 30*time.Minute + scheduleSlack, wantReady: "True/Scheduled: next run at 2026-11-23T16:00:00Z",
			wantEvents: []string{"Normal " + ReasonMissedSchedules},
		},
		"missed times older than startingDeadlineSeconds neither run nor count": {
			cj: hourly.Clone().StartingDeadlineSeconds(600).Obj(), now: t0.Add(5*time.Hour + 5*time.Minute),
			wantDue: t0.Add(5 * time.Hour), wantMissed: 1, wantAfter: 55*time.Minute + scheduleSlack, wantReady: "True/Scheduled: next run at 2026-11-23T16:00:00Z",
		},
		"past startingDeadlineSeconds: nothing due": {
			cj: hourly.Clone().StartingDeadlineSeconds(600).Obj(), now: t0.Add(5*time.Hour + 20*time.Minute),
			wantAfter: 40*time.Minute + scheduleSlack, wantReady: "True/Scheduled: next run at 2026-11-23T16:00:00Z",
		},
		"too many missed: the latest is due": {
			cj: hourly.Clone().Schedule("* * * * *").Obj(), now: t0.Add(3 * time.Hour),
			wantDue: t0.Add(3 * time.Hour), wantMissed: 101, wantAfter: time.Minute + scheduleSlack, wantReady: "True/Scheduled: next run at 2026-11-23T13:01:00Z",
			wantEvents: []string{"Warning " + ReasonTooManyMissed},
		},
		"in its time zone": {
			cj:      hourly.Clone().Schedule("0 2 * * *").TimeZone("America/New_York").Obj(),
			now:     time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC), // 02:00 in New York (EST)
			wantDue: time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC), wantMissed: 1, wantAfter: 24*time.Hour + scheduleSlack,
			wantReady: "True/Scheduled: next run at 2026-11-25T07:00:00Z",
		},
		"suspended: nothing due, no timer": {
			cj: hourly.Clone().Suspend(true).Obj(), now: t0.Add(5 * time.Hour),
			wantReady: "True/" + ReasonScheduleSuspended + ": suspended: no new runs until it is resumed",
		},
		"invalid schedule": {
			cj: hourly.Clone().Schedule("61 2 * * *").Obj(), now: t0.Add(5 * time.Hour),
			wantReady: invalid(t, "61 2 * * *", ""),
		},
		"invalid time zone": {
			cj: hourly.Clone().TimeZone("Mars/Olympus_Mons").Obj(), now: t0.Add(5 * time.Hour),
			wantReady: invalid(t, "0 * * * *", "Mars/Olympus_Mons"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := tc.cj.Status.DeepCopy()
			p := planSchedule(tc.cj, st, tc.now)
			if !p.due.Equal(tc.wantDue) || p.missed != tc.wantMissed || p.requeueAfter != tc.wantAfter {
				t.Errorf("due %s (%d missed), requeue after %s; want %s (%d), %s",
					p.due.UTC().Format(time.RFC3339), p.missed, p.requeueAfter, tc.wantDue.UTC().Format(time.RFC3339), tc.wantMissed, tc.wantAfter)
			}
			if diff := cmp.Diff(tc.wantReady, cronReady(&kiln.CronTrainJob{Status: *st})); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			var evs []string
			for _, e := range p.events {
				evs = append(evs, e.kind+" "+e.reason)
			}
			if diff := cmp.Diff(tc.wantEvents, evs); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if !tc.cj.Status.LastScheduleTime.Equal(st.LastScheduleTime) {
				t.Error("planning moved lastScheduleTime")
			}
		})
	}
}

func TestCronReconcileDueTime(t *testing.T) {
	active := hourly.Run(t0.Add(-time.Hour)).Obj()
	for name, tc := range map[string]struct {
		cj          *kiln.CronTrainJob
		now         time.Time
		wantRuns    []string
		wantLast    *metav1.Time
		wantReady   string
		wantAfter   time.Duration
		wantEvents  []string
		wantMissed  float64
		wantCreated float64
	}{
		"missed while away: the latest runs, once": {
			cj: hourly.Clone().Obj(), now: t0.Add(5*time.Hour + 30*time.Minute),
			wantRuns: []string{active.Name, kiln.RunName("hourly", t0.Add(5*time.Hour))}, wantLast: ptr.To(metav1.NewTime(t0.Add(5 * time.Hour))),
			wantReady: "True/Scheduled: next run at 2026-11-23T16:00:00Z", wantAfter: 30*time.Minute + scheduleSlack,
			wantEvents: []string{"Normal " + ReasonMissedSchedules, "Normal " + ReasonSuccessfulCreate}, wantMissed: 4, wantCreated: 1,
		},
		"missed beyond startingDeadlineSeconds: nothing runs": {
			cj: hourly.Clone().StartingDeadlineSeconds(600).Obj(), now: t0.Add(5*time.Hour + 20*time.Minute),
			wantRuns:  []string{active.Name},
			wantReady: "True/Scheduled: next run at 2026-11-23T16:00:00Z", wantAfter: 40*time.Minute + scheduleSlack,
		},
		"too many missed: the latest runs": {
			cj: hourly.Clone().Schedule("* * * * *").Obj(), now: t0.Add(3*time.Hour + 10*time.Second),
			wantRuns: []string{active.Name, kiln.RunName("hourly", t0.Add(3*time.Hour))}, wantLast: ptr.To(metav1.NewTime(t0.Add(3 * time.Hour))),
			wantReady: "True/Scheduled: next run at 2026-11-23T13:01:00Z", wantAfter: 50*time.Second + scheduleSlack,
			wantEvents: []string{"Warning " + ReasonTooManyMissed, "Normal " + ReasonSuccessfulCreate}, wantMissed: 100, wantCreated: 1,
		},
		"suspended: no run, no timer": {
			cj: hourly.Clone().Suspend(true).Obj(), now: t0.Add(5 * time.Hour),
			wantRuns:  []string{active.Name},
			wantReady: "True/" + ReasonScheduleSuspended + ": suspended: no new runs until it is resumed",
		},
		"invalid schedule: no run, no timer": {
			cj: hourly.Clone().Schedule("0 0 2 * * 0").Obj(), now: t0.Add(5 * time.Hour),
			wantRuns:  []string{active.Name},
			wantReady: invalid(t, "0 0 2 * * 0", ""),
		},
		"invalid time zone: no run, no timer": {
			cj: hourly.Clone().TimeZone("Local").Obj(), now: t0.Add(5 * time.Hour),
			wantRuns:  []string{active.Name},
			wantReady: invalid(t, "0 * * * *", "Local"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newCronHarness(t, tc.now, tc.cj, active.DeepCopy())
			c := counters{"missed": cronMissed, "created": cronRuns.WithLabelValues(RunCreated)}
			was := c.read()
			res := h.reconcile(tc.cj, tc.now)
			if diff := cmp.Diff(reconcile.Result{RequeueAfter: tc.wantAfter}, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRuns, h.runNames()); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			got := h.cronTrainJob(tc.cj)
			if diff := cmp.Diff(tc.wantLast, got.Status.LastScheduleTime); diff != "" {
				t.Errorf("lastScheduleTime (-want +got):\n%s", diff)
			}
			// The active runs are listed whatever the schedule says.
			if diff := cmp.Diff(tc.wantRuns, activeNames(got)); diff != "" {
				t.Errorf("active (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReady, cronReady(got)); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, h.recorded()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if h.writes != 1 {
				t.Errorf("%d status writes, want 1", h.writes)
			}
			now := c.read()
			if diff := cmp.Diff(map[string]float64{"missed": tc.wantMissed, "created": tc.wantCreated},
				map[string]float64{"missed": now["missed"] - was["missed"], "created": now["created"] - was["created"]}); diff != "" {
				t.Errorf("metrics added (-want +got):\n%s", diff)
			}
		})
	}
}

// While Forbid holds a run back, every reconcile finds the same instant due: its misses and
// its skip are counted once, its events recorded each time.
func TestCronReconcileCountsADueInstantOnce(t *testing.T) {
	cj := hourly.Clone().ConcurrencyPolicy(kiln.ForbidConcurrent).Obj()
	active := hourly.Run(t0.Add(-time.Hour)).Obj()
	h := newCronHarness(t, t0, cj, active)
	c := counters{"missed": cronMissed, "skipped": cronRuns.WithLabelValues(RunSkipped)}
	was := c.read()
	for _, now := range []time.Time{t0.Add(3*time.Hour + time.Minute), t0.Add(3*time.Hour + 2*time.Minute)} {
		h.reconcile(cj, now)
		if diff := cmp.Diff([]string{"Normal " + ReasonMissedSchedules, "Normal " + ReasonJobAlreadyActive}, h.recorded()); diff != "" {
			t.Errorf("events at %s (-want +got):\n%s", now.Format(time.TimeOnly), diff)
		}
	}
	got := c.read()
	if diff := cmp.Diff(map[string]float64{"missed": 2, "skipped": 1}, map[string]float64{"missed": got["missed"] - was["missed"], "skipped": got["skipped"] - was["skipped"]}); diff != "" {
		t.Errorf("metrics added (-want +got):\n%s", diff)
	}

	// The next instant is due: its skip counts again.
	h.reconcile(cj, t0.Add(4*time.Hour))
	if d := testutil.ToFloat64(cronRuns.WithLabelValues(RunSkipped)) - was["skipped"]; d != 2 {
		t.Errorf("skips counted %v, want 2", d)
	}
	if err := h.client.Get(t.Context(), client.ObjectKeyFromObject(active), &trainer.TrainJob{}); err != nil {
		t.Errorf("the active run: %v", err)
	}
}

func TestDueSeenCountsAnInstantOnce(t *testing.T) {
	var d dueSeen
	cj := types.NamespacedName{Namespace: "ns", Name: "weekly"}
	due := t0
	if !d.first(cj, due) || d.first(cj, due) {
		t.Error("the first sight of a due instant is not first, or the second is")
	}
	if !d.first(cj, due.Add(time.Hour)) {
		t.Error("the next due instant is not first")
	}
	d.forget(cj)
	if !d.first(cj, due.Add(time.Hour)) {
		t.Error("a forgotten CronTrainJob's instant is not first")
	}
}
