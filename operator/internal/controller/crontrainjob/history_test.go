package crontrainjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
)

// Hourly runs of the morning: which go, at 10:30 (nothing due), by the limits.
func TestCronReconcileHistoryLimits(t *testing.T) {
	at := func(h int) time.Time { return t0.Add(time.Duration(h-10) * time.Hour) }
	runName := func(h int) string { return kiln.RunName("hourly", at(h)) }
	succeeded := func(h int) client.Object { return finishedAt(hourly.Run(at(h)), true, at(h).Add(30*time.Minute)) }
	failed := func(h int) client.Object { return finishedAt(hourly.Run(at(h)), false, at(h).Add(30*time.Minute)) }
	active := func(h int) client.Object { return hourly.Run(at(h)).Obj() }
	for name, tc := range map[string]struct {
		cj                 *kilntesting.CronTrainJobWrapper
		runs               []client.Object
		wantRuns           []string
		wantActive         []string
		wantLastSuccessful *metav1.Time
		wantEvents         []string
	}{
		"the oldest successful runs past the limit go": {
			cj:                 hourly.Clone().HistoryLimits(2, 1),
			runs:               []client.Object{succeeded(5), succeeded(6), succeeded(7), succeeded(8)},
			wantRuns:           []string{runName(7), runName(8)},
			wantLastSuccessful: ptr.To(metav1.NewTime(at(8).Add(30 * time.Minute))),
			wantEvents:         []string{"Normal " + ReasonSuccessfulDelete, "Normal " + ReasonSuccessfulDelete},
		},
		"the oldest failed runs past the limit go; active runs stay": {
			cj:         hourly.Clone().HistoryLimits(3, 1),
			runs:       []client.Object{failed(5), active(6), failed(7), succeeded(8), active(9)},
			wantRuns:   []string{runName(6), runName(7), runName(8), runName(9)},
			wantActive: []string{runName(6), runName(9)}, wantLastSuccessful: ptr.To(metav1.NewTime(at(8).Add(30 * time.Minute))),
			wantEvents: []string{"Normal " + ReasonSuccessfulDelete},
		},
		"limits of 0 keep no finished run": {
			cj:                 hourly.Clone().HistoryLimits(0, 0),
			runs:               []client.Object{succeeded(5), failed(6), active(7)},
			wantRuns:           []string{runName(7)},
			wantActive:         []string{runName(7)},
			wantLastSuccessful: ptr.To(metav1.NewTime(at(5).Add(30 * time.Minute))),
			wantEvents:         []string{"Normal " + ReasonSuccessfulDelete, "Normal " + ReasonSuccessfulDelete},
		},
		"unset limits: 3 successful, 1 failed": {
			cj:                 unsetLimits(hourly.Clone()),
			runs:               []client.Object{succeeded(4), succeeded(5), succeeded(6), failed(7), failed(8), succeeded(9)},
			wantRuns:           []string{runName(5), runName(6), runName(8), runName(9)},
			wantLastSuccessful: ptr.To(metav1.NewTime(at(9).Add(30 * time.Minute))),
			wantEvents:         []string{"Normal " + ReasonSuccessfulDelete, "Normal " + ReasonSuccessfulDelete},
		},
		"a run not owned by it stays": {
			cj:       hourly.Clone().HistoryLimits(0, 0),
			runs:     []client.Object{kilntesting.MakeTrainJob(runName(5), "ns").Label(kiln.LabelCronTrainJob, "hourly").Obj()},
			wantRuns: []string{runName(5)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			cj := tc.cj.Obj()
			h := newCronHarness(t, t0, append(tc.runs, cj)...)
			h.reconcile(cj, t0.Add(30*time.Minute))
			if diff := cmp.Diff(tc.wantRuns, h.runNames()); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			got := h.cronTrainJob(cj)
			if diff := cmp.Diff(tc.wantActive, activeNames(got)); diff != "" {
				t.Errorf("active (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLastSuccessful, got.Status.LastSuccessfulTime); diff != "" {
				t.Errorf("lastSuccessfulTime (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, h.recorded()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if h.writes != 1 {
				t.Errorf("%d status writes, want 1", h.writes)
			}
		})
	}
}

func unsetLimits(w *kilntesting.CronTrainJobWrapper) *kilntesting.CronTrainJobWrapper {
	w.Spec.SuccessfulJobsHistoryLimit, w.Spec.FailedJobsHistoryLimit = nil, nil
	return w
}
