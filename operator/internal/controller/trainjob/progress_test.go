package trainjob

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// report writes a trainer status at the clock's time, as the status server does.
func (h *harness) report(tj *trainer.TrainJob) {
	h.t.Helper()
	got := h.trainJob(tj)
	got.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](10), LastUpdatedTime: metav1.NewTime(h.clock.Now())}
	if err := h.client.Status().Update(context.Background(), got); err != nil {
		h.t.Fatal(err)
	}
}

// jobOf creates a Job of the TrainJob's JobSet, as JobSet would.
func (h *harness) jobOf(tj *trainer.TrainJob) *batchv1.Job {
	h.t.Helper()
	js := h.jobSet(tj)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: tj.Name + "-node-0", Namespace: tj.Namespace,
		Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: js.Name, jobsetv1alpha2.JobSetUIDKey: string(js.UID)}}}
	if err := h.client.Create(context.Background(), job); err != nil {
		h.t.Fatal(err)
	}
	return job
}

func (h *harness) exists(obj client.Object) bool {
	h.t.Helper()
	err := h.client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatal(err)
	}
	return err == nil
}

func timer(d time.Duration) reconcile.Result {
	return reconcile.Result{RequeueAfter: d, Priority: ptr.To(timerPriority)}
}

func TestProgressDeadlineRestartsOnceThenFails(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").Annotation(kiln.AnnotationProgressDeadline, "10m").Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())
	if diff := cmp.Diff(reconcile.Result{}, h.reconcile(tj)); diff != "" {
		t.Errorf("a job that never reported has no progress timer (-want +got):\n%s", diff)
	}
	h.clock.SetTime(t0.Add(time.Hour))
	h.reconcile(tj)
	if got := h.trainJob(tj); got.Status.Restarts != nil || trainer.Finished(&got.Status) {
		t.Fatalf("a job that never reported was judged: %+v", got.Status)
	}
	job := h.jobOf(tj)
	h.recorded()

	// It reports; ten silent minutes later it has stalled.
	h.clock.SetTime(t0.Add(time.Hour + time.Minute))
	h.report(tj)
	if diff := cmp.Diff(timer(10*time.Minute), h.reconcile(tj)); diff != "" {
		t.Errorf("after a report (-want +got):\n%s", diff)
	}
	h.clock.SetTime(t0.Add(time.Hour + 11*time.Minute - time.Second))
	if diff := cmp.Diff(timer(time.Second), h.reconcile(tj)); diff != "" {
		t.Errorf("a second before the stall (-want +got):\n%s", diff)
	}
	h.clock.SetTime(t0.Add(time.Hour + 11*time.Minute))
	if diff := cmp.Diff(timer(10*time.Minute), h.reconcile(tj)); diff != "" {
		t.Errorf("at the stall: the next judgement is from the restart (-want +got):\n%s", diff)
	}
	got := h.trainJob(tj)
	want := &trainer.RestartsStatus{Count: 1, ProgressStalls: 1, LastReason: trainer.TrainJobProgressStalledReason,
		LastMessage:     "no progress reported for 10m0s (its kiln.dev/progress-deadline is 10m0s): restarting all its pods once; a second stall fails the job",
		LastRestartTime: ptr.To(metav1.NewTime(h.clock.Now()))}
	if diff := cmp.Diff(want, got.Status.Restarts); diff != "" {
		t.Errorf("restarts (-want +got):\n%s", diff)
	}
	if trainer.Finished(&got.Status) {
		t.Error("the first stall failed the job")
	}
	if h.exists(job) {
		t.Error("the stalled job's Jobs were not deleted (JobSet recreates them: the restart)")
	}
	if diff := cmp.Diff([]string{"Warning " + ReasonRestarted}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// Silent again for the deadline, counted from the restart: failed.
	h.clock.SetTime(t0.Add(time.Hour + 21*time.Minute))
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: killDelay, Priority: ptr.To(killPriority)}, h.reconcile(tj)); diff != "" {
		t.Errorf("the second stall (-want +got):\n%s", diff)
	}
	got = h.trainJob(tj)
	if c := condition(got, trainer.TrainJobFailed); c != "True/"+trainer.TrainJobProgressDeadlineExceededReason {
		t.Errorf("Failed %q, want True/ProgressDeadlineExceeded", c)
	}
	if diff := cmp.Diff([]string{"Warning " + trainer.TrainJobProgressDeadlineExceededReason}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	h.reconcile(tj)
	if h.jobSet(tj) != nil {
		t.Error("the JobSet of a job that failed its progress deadline is still there")
	}
}

// Time suspended (or queued: Kueue suspends a queued job) never counts: the job's start,
// set again on resume, is a sign of life.
func TestProgressDeadlineSkipsSuspendedTime(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").Annotation(kiln.AnnotationProgressDeadline, "10m").Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())
	h.reconcile(tj)
	h.report(tj)
	h.clock.SetTime(t0.Add(5 * time.Minute))
	got := h.trainJob(tj)
	got.Spec.Suspend = ptr.To(true)
	if err := h.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reconcile.Result{}, h.reconcile(tj)); diff != "" {
		t.Errorf("suspended: no progress timer (-want +got):\n%s", diff)
	}
	h.clock.SetTime(t0.Add(3 * time.Hour))
	h.reconcile(tj)
	got = h.trainJob(tj)
	got.Spec.Suspend = ptr.To(false)
	if err := h.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(timer(10*time.Minute), h.reconcile(tj)); diff != "" {
		t.Errorf("resumed after three hours: ten minutes from the resume (-want +got):\n%s", diff)
	}
	if got := h.trainJob(tj); got.Status.Restarts != nil {
		t.Errorf("a job silent only while suspended was restarted: %+v", got.Status.Restarts)
	}
}

func TestProgressDeadlineAnnotation(t *testing.T) {
	for v, want := range map[string]time.Duration{"15m": 15 * time.Minute, "1h30m": 90 * time.Minute} {
		if got, err := ProgressDeadline(kilntesting.MakeTrainJob("j", "ns").Annotation(kiln.AnnotationProgressDeadline, v).Obj()); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"90", "-5m", "0s", "soon"} {
		if _, err := ProgressDeadline(kilntesting.MakeTrainJob("j", "ns").Annotation(kiln.AnnotationProgressDeadline, v).Obj()); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
}

// A report after the first wakes nothing: the deadline's clock already runs. The first
// report, and any change beside the trainer status, still reconciles.
func TestProgressOnlyUpdatesAreNotReconciled(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	base := kilntesting.MakeTrainJob("job", "ns").Obj()
	reported := func(tj *trainer.TrainJob, step string) *trainer.TrainJob {
		tj = tj.DeepCopy()
		tj.ResourceVersion = step
		tj.Status.TrainerStatus = &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: kiln.MetricStep, Value: step}}, LastUpdatedTime: at}
		return tj
	}
	first, second := reported(base, "1"), reported(base, "2")
	failed := second.DeepCopy()
	failed.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue}}
	annotated := second.DeepCopy()
	annotated.Annotations = map[string]string{kiln.AnnotationProgressDeadline: "5m"}
	deleting := second.DeepCopy()
	deleting.DeletionTimestamp = &at
	for _, c := range []struct {
		name     string
		old, cur *trainer.TrainJob
		want     bool
	}{
		{"the first report", base, first, true},
		{"a later report", first, second, false},
		{"a report and a condition", first, failed, true},
		{"a report and an annotation", first, annotated, true},
		{"a report and a deletion", first, deleting, true},
		{"a resync", second, second, true},
	} {
		if got := (notProgressOnly{}).Update(ctrlevent.UpdateEvent{ObjectOld: c.old, ObjectNew: c.cur}); got != c.want {
			t.Errorf("%s: reconciled %v, want %v", c.name, got, c.want)
		}
	}
}
