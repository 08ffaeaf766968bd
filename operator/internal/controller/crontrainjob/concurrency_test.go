package crontrainjob

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// A run is due at 11:00 while the run of 10:00 is active (queued, or running).
func TestCronReconcileConcurrencyPolicy(t *testing.T) {
	due := t0.Add(time.Hour)
	earlier, next := kiln.RunName("hourly", t0), kiln.RunName("hourly", due)
	for name, tc := range map[string]struct {
		policy      kiln.ConcurrencyPolicy
		wantRuns    []string
		wantActive  []string
		wantLast    *metav1.Time
		wantEvents  []string
		wantOutcome map[string]float64
	}{
		"Allow: side by side": {
			policy:   kiln.AllowConcurrent,
			wantRuns: []string{earlier, next}, wantActive: []string{earlier, next}, wantLast: ptr.To(metav1.NewTime(due)),
			wantEvents:  []string{"Normal " + ReasonSuccessfulCreate},
			wantOutcome: map[string]float64{RunCreated: 1, RunSkipped: 0, RunReplaced: 0},
		},
		"Forbid: held back, the time stays due": {
			policy:   kiln.ForbidConcurrent,
			wantRuns: []string{earlier}, wantActive: []string{earlier}, wantLast: ptr.To(metav1.NewTime(t0)),
			wantEvents:  []string{"Normal " + ReasonJobAlreadyActive},
			wantOutcome: map[string]float64{RunCreated: 0, RunSkipped: 1, RunReplaced: 0},
		},
		"Replace: the active run goes": {
			policy:   kiln.ReplaceConcurrent,
			wantRuns: []string{next}, wantActive: []string{next}, wantLast: ptr.To(metav1.NewTime(due)),
			wantEvents:  []string{"Normal " + ReasonSuccessfulDelete, "Normal " + ReasonSuccessfulCreate},
			wantOutcome: map[string]float64{RunCreated: 1, RunSkipped: 0, RunReplaced: 1},
		},
	} {
		t.Run(name, func(t *testing.T) {
			cj := hourly.Clone().ConcurrencyPolicy(tc.policy).LastScheduleTime(t0).Obj()
			h := newCronHarness(t, due, cj, hourly.Run(t0).Obj())
			c := counters{}
			for outcome := range tc.wantOutcome {
				c[outcome] = cronRuns.WithLabelValues(outcome)
			}
			was := c.read()
			res := h.reconcile(cj, due.Add(time.Minute))
			if diff := cmp.Diff(reconcile.Result{RequeueAfter: 59*time.Minute + scheduleSlack}, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRuns, h.runNames()); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			got := h.cronTrainJob(cj)
			if diff := cmp.Diff(tc.wantActive, activeNames(got)); diff != "" {
				t.Errorf("active (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLast, got.Status.LastScheduleTime); diff != "" {
				t.Errorf("lastScheduleTime (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, h.recorded()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if h.writes != 1 {
				t.Errorf("%d status writes, want 1", h.writes)
			}
			added := c.read()
			for k := range added {
				added[k] -= was[k]
			}
			if diff := cmp.Diff(tc.wantOutcome, added); diff != "" {
				t.Errorf("kiln_crontrainjob_runs_total added (-want +got):\n%s", diff)
			}
		})
	}
}

// Forbid holds the run back until the active one finishes; within startingDeadlineSeconds
// it then starts, past them it never does.
func TestCronReconcileForbidStartsTheHeldRunWhenTheActiveFinishes(t *testing.T) {
	due := t0.Add(time.Hour)
	for name, tc := range map[string]struct {
		deadline *int64
		wantRuns []string
		wantLast *metav1.Time
	}{
		"no deadline: it starts":           {wantRuns: []string{kiln.RunName("hourly", t0), kiln.RunName("hourly", due)}, wantLast: ptr.To(metav1.NewTime(due))},
		"past the deadline: it never does": {deadline: ptr.To[int64](600), wantRuns: []string{kiln.RunName("hourly", t0)}, wantLast: ptr.To(metav1.NewTime(t0))},
	} {
		t.Run(name, func(t *testing.T) {
			w := hourly.Clone().ConcurrencyPolicy(kiln.ForbidConcurrent).LastScheduleTime(t0)
			w.Spec.StartingDeadlineSeconds = tc.deadline
			cj := w.Obj()
			active := hourly.Run(t0).Obj()
			h := newCronHarness(t, due, cj, active)
			h.reconcile(cj, due)
			h.recorded()

			got := &trainer.TrainJob{}
			if err := h.client.Get(t.Context(), client.ObjectKeyFromObject(active), got); err != nil {
				t.Fatal(err)
			}
			finished := finishedAt(&kilntesting.TrainJobWrapper{TrainJob: *got}, true, due.Add(20*time.Minute))
			if err := h.client.Status().Update(t.Context(), finished); err != nil {
				t.Fatal(err)
			}
			h.reconcile(cj, due.Add(20*time.Minute))
			if diff := cmp.Diff(tc.wantRuns, h.runNames()); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLast, h.cronTrainJob(cj).Status.LastScheduleTime); diff != "" {
				t.Errorf("lastScheduleTime (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCronReconcileCreateFails(t *testing.T) {
	cj := hourly.Clone().ConcurrencyPolicy(kiln.ReplaceConcurrent).LastScheduleTime(t0).Obj()
	due := t0.Add(time.Hour)
	h := newCronHarness(t, due, cj, hourly.Run(t0).Obj())
	h.failCreate = apierrors.NewForbidden(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "trainjobs"}, kiln.RunName("hourly", due), errors.New("exceeded quota"))
	was := counters{"create_failed": cronRuns.WithLabelValues(RunCreateFailed)}.read()
	res, err := h.reconcileErr(cj, due)
	if !apierrors.IsForbidden(err) {
		t.Errorf("Reconcile error %v, want the apiserver's (wrapped), for a retry with backoff", err)
	}
	if diff := cmp.Diff(reconcile.Result{}, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	// The replaced run is gone, the new one is not there: both are said.
	if diff := cmp.Diff([]string{"Normal " + ReasonSuccessfulDelete, "Warning " + ReasonFailedCreate}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if h.writes != 0 {
		t.Errorf("%d status writes, want none: lastScheduleTime stays, so that the retry creates the run", h.writes)
	}
	now := counters{"create_failed": cronRuns.WithLabelValues(RunCreateFailed)}.read()
	if d := now["create_failed"] - was["create_failed"]; d != 1 {
		t.Errorf("create_failed counted %v times, want 1", d)
	}

	h.failCreate = nil
	h.reconcile(cj, due.Add(time.Minute))
	if diff := cmp.Diff([]string{kiln.RunName("hourly", due)}, h.runNames()); diff != "" {
		t.Errorf("runs after the retry (-want +got):\n%s", diff)
	}
}
