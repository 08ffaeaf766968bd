package trainjob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
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
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kiln-ml/kiln/api/kueue"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// t0 is the fake clock's start; whole seconds, as the API stores times.
var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// harness is the reconciler over a fake client and a fake clock: a reconcile runs in
// microseconds, and a timer falls due by moving the clock, not by waiting.
type harness struct {
	t      *testing.T
	client client.Client
	clock  *clocktesting.FakePassiveClock
	events *events.FakeRecorder
	r      *Reconciler
}

func newHarness(t *testing.T, objs ...client.Object) *harness {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme, jobsetv1alpha2.AddToScheme, kueue.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&trainer.TrainJob{}, &jobsetv1alpha2.JobSet{}).Build()
	h := &harness{t: t, client: c, clock: clocktesting.NewFakePassiveClock(t0), events: events.NewFakeRecorder(100)}
	h.r = NewReconciler(c, c, h.events, h.clock)
	return h
}

func (h *harness) reconcile(tj *trainer.TrainJob) reconcile.Result {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tj)})
	// What a reconcile handed to the stopper is done before the test looks.
	h.r.stopper.wait()
	if err != nil {
		h.t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// created runs the reconcile that creates the job's JobSet, which writes no status, then
// the one its JobSet's watch event queues, and returns that one's result.
func (h *harness) created(tj *trainer.TrainJob) reconcile.Result {
	h.t.Helper()
	if diff := cmp.Diff(reconcile.Result{}, h.reconcile(tj)); diff != "" {
		h.t.Errorf("the reconcile that creates the JobSet (-want +got):\n%s", diff)
	}
	if h.jobSet(tj) == nil {
		h.t.Fatal("the first reconcile created no JobSet")
	}
	return h.reconcile(tj)
}

func (h *harness) trainJob(tj *trainer.TrainJob) *trainer.TrainJob {
	h.t.Helper()
	got := &trainer.TrainJob{}
	if err := h.client.Get(context.Background(), client.ObjectKeyFromObject(tj), got); err != nil {
		h.t.Fatalf("reading TrainJob: %v", err)
	}
	return got
}

// jobSet is the TrainJob's JobSet, nil when there is none.
func (h *harness) jobSet(tj *trainer.TrainJob) *jobsetv1alpha2.JobSet {
	h.t.Helper()
	js := &jobsetv1alpha2.JobSet{}
	err := h.client.Get(context.Background(), client.ObjectKeyFromObject(tj), js)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatalf("reading JobSet: %v", err)
	}
	return js
}

// recorded drains the events recorded so far, as "<type> <reason>".
func (h *harness) recorded() []string {
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

func condition(tj *trainer.TrainJob, t string) string {
	c := meta.FindStatusCondition(tj.Status.Conditions, t)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

var torch = kilntesting.MakeRuntime("torch-distributed")

func TestReconcileCreatesJobSetAndCountsTheDeadline(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").ActiveDeadlineSeconds(3600).Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())

	// The reconcile that creates the JobSet does that only: the status is the next one's.
	if diff := cmp.Diff(reconcile.Result{}, h.reconcile(tj)); diff != "" {
		t.Errorf("the reconcile that creates the JobSet (-want +got):\n%s", diff)
	}
	js := h.jobSet(tj)
	if js == nil || !metav1.IsControlledBy(js, tj) {
		t.Fatalf("JobSet %v not created, or not controlled by the TrainJob", js)
	}
	if st := h.trainJob(tj).Status; st.StartTime != nil || len(st.Conditions) > 0 {
		t.Errorf("the reconcile that created the JobSet wrote the status %+v", st)
	}
	// Queued again by the JobSet's creation, a second later: the deadline counts from the
	// JobSet's creation, not from when the status says so.
	js.CreationTimestamp = metav1.NewTime(t0)
	if err := h.client.Update(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	h.clock.SetTime(t0.Add(time.Second))
	res := h.reconcile(tj)
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: time.Hour - time.Second, Priority: ptr.To(timerPriority)}, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	got := h.trainJob(tj)
	if diff := cmp.Diff(ptr.To(metav1.NewTime(t0)), got.Status.StartTime); diff != "" {
		t.Errorf("startTime (-want +got):\n%s", diff)
	}
	snapshot := &corev1.ConfigMap{}
	if err := h.client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: trainer.RuntimeSnapshotName("job")}, snapshot); err != nil {
		t.Errorf("runtime snapshot not stored: %v", err)
	}
	if diff := cmp.Diff([]string{"Normal Created"}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestReconcileDeadline(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").ActiveDeadlineSeconds(60).Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())
	h.created(tj)
	js := h.jobSet(tj)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "job-node-0", Namespace: "ns",
		Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: js.Name, jobsetv1alpha2.JobSetUIDKey: string(js.UID)}}}
	if err := h.client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	h.recorded()

	h.clock.SetTime(t0.Add(59 * time.Second))
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: time.Second, Priority: ptr.To(timerPriority)}, h.reconcile(tj)); diff != "" {
		t.Errorf("a second before the deadline (-want +got):\n%s", diff)
	}

	// The JobSet is deleted only once the failure is stored: a TrainJob whose JobSet is gone
	// but that is not known to have failed would create it again.
	h.r.stopper.client = failedFirst{Client: h.client, t: t, tj: client.ObjectKeyFromObject(tj)}
	h.clock.SetTime(t0.Add(60 * time.Second))
	res := h.reconcile(tj)
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: killDelay, Priority: ptr.To(killPriority)}, res); diff != "" {
		t.Errorf("at the deadline (-want +got):\n%s", diff)
	}
	got := h.trainJob(tj)
	if c := condition(got, trainer.TrainJobFailed); c != "True/"+trainer.TrainJobDeadlineExceededReason {
		t.Errorf("Failed condition %q, want True/DeadlineExceeded", c)
	}
	if diff := cmp.Diff(ptr.To(metav1.NewTime(t0.Add(60*time.Second))), got.Status.CompletionTime); diff != "" {
		t.Errorf("completionTime (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Warning " + trainer.TrainJobDeadlineExceededReason}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	if diff := cmp.Diff(reconcile.Result{}, h.reconcile(tj)); diff != "" {
		t.Errorf("the kill reconcile (-want +got):\n%s", diff)
	}
	if js := h.jobSet(tj); js != nil {
		t.Errorf("JobSet %s still there after the deadline", js.Name)
	}
	if err := h.client.Get(context.Background(), client.ObjectKeyFromObject(job), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("the JobSet's Job is still there after the deadline (err %v)", err)
	}
	h.clock.SetTime(t0.Add(time.Hour))
	h.reconcile(tj)
	if js := h.jobSet(tj); js != nil {
		t.Error("a JobSet was created again for a job that failed its deadline")
	}
}

func TestReconcileTTL(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").TTLSecondsAfterFinished(30).StartTime(t0).
		Condition(trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", "done").Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())

	h.clock.SetTime(t0.Add(10 * time.Second))
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: 30 * time.Second, Priority: ptr.To(timerPriority)}, h.reconcile(tj)); diff != "" {
		t.Errorf("just finished (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ptr.To(metav1.NewTime(t0.Add(10*time.Second))), h.trainJob(tj).Status.CompletionTime); diff != "" {
		t.Errorf("completionTime (-want +got):\n%s", diff)
	}
	if h.jobSet(tj) != nil {
		t.Error("a finished TrainJob created a JobSet")
	}

	h.clock.SetTime(t0.Add(39 * time.Second))
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: time.Second, Priority: ptr.To(timerPriority)}, h.reconcile(tj)); diff != "" {
		t.Errorf("a second before the TTL (-want +got):\n%s", diff)
	}
	h.clock.SetTime(t0.Add(40 * time.Second))
	stale := h.trainJob(tj)
	h.reconcile(tj)
	if err := h.client.Get(context.Background(), client.ObjectKeyFromObject(tj), &trainer.TrainJob{}); !apierrors.IsNotFound(err) {
		t.Errorf("TrainJob still there after its TTL (err %v)", err)
	}
	if diff := cmp.Diff([]string{"Normal " + ReasonTTLExpired}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// A reconcile of a stale copy (the cache not yet showing the deletion) deletes
	// nothing and records nothing: TTLExpired is recorded once per deletion.
	if _, err := h.r.reconcile(context.Background(), stale); err != nil {
		t.Fatalf("reconciling a stale copy: %v", err)
	}
	if got := h.recorded(); len(got) != 0 {
		t.Errorf("a stale copy recorded %v", got)
	}
}

func TestReconcileSuspendAndResume(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").ActiveDeadlineSeconds(600).Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())
	h.reconcile(tj)
	h.recorded()

	h.clock.SetTime(t0.Add(5 * time.Minute))
	got := h.trainJob(tj)
	got.Spec.Suspend = ptr.To(true)
	if err := h.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reconcile.Result{}, h.reconcile(tj)); diff != "" {
		t.Errorf("suspended: no timer (-want +got):\n%s", diff)
	}
	got = h.trainJob(tj)
	if got.Status.StartTime != nil || condition(got, trainer.TrainJobSuspended) != "True/"+trainer.TrainJobSuspendedReason {
		t.Errorf("suspended job: startTime %v, Suspended %q; want none and True/Suspended", got.Status.StartTime, condition(got, trainer.TrainJobSuspended))
	}
	if !ptr.Deref(h.jobSet(tj).Spec.Suspend, false) {
		t.Error("JobSet not suspended")
	}

	h.clock.SetTime(t0.Add(time.Hour))
	got.Spec.Suspend = ptr.To(false)
	if err := h.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	res := h.reconcile(tj)
	got = h.trainJob(tj)
	// The fake client keeps no managedFields, so the resume counts from now.
	if diff := cmp.Diff(ptr.To(metav1.NewTime(t0.Add(time.Hour))), got.Status.StartTime); diff != "" {
		t.Errorf("startTime after resume (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: 10 * time.Minute, Priority: ptr.To(timerPriority)}, res); diff != "" {
		t.Errorf("the deadline restarts on resume (-want +got):\n%s", diff)
	}
	if c := condition(got, trainer.TrainJobSuspended); c != "False/"+trainer.TrainJobResumedReason {
		t.Errorf("Suspended %q, want False/Resumed", c)
	}
	if ptr.Deref(h.jobSet(tj).Spec.Suspend, true) {
		t.Error("JobSet still suspended after resume")
	}
	if diff := cmp.Diff([]string{"Normal " + ReasonSuspended, "Normal " + ReasonResumed}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestReconcileCountsFromKueueAdmission(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").Queue("default").Suspend(false).ActiveDeadlineSeconds(3600).Obj()
	admitted := t0.Add(-10 * time.Minute)
	wl := &kueuev1beta2.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "trainjob-job-abcde", Namespace: "ns", Labels: map[string]string{trainer.KueueJobUIDLabel: string(tj.UID)}},
		Status: kueuev1beta2.WorkloadStatus{Conditions: []metav1.Condition{
			{Type: kueuev1beta2.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: metav1.NewTime(admitted)},
		}},
	}
	h := newHarness(t, tj, wl, torch.ClusterTrainingRuntime())
	res := h.created(tj)
	if diff := cmp.Diff(ptr.To(metav1.NewTime(admitted)), h.trainJob(tj).Status.StartTime); diff != "" {
		t.Errorf("startTime is not Kueue's admission (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: 50 * time.Minute, Priority: ptr.To(timerPriority)}, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestReconcileMirrorsJobSet(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())
	h.reconcile(tj)
	h.recorded()
	js := h.jobSet(tj)
	js.Status = kilntesting.MakeJobSet(tj).ReplicatedJobStatus("node", 0, 1, 0, 0, 0).
		Condition(jobsetv1alpha2.JobSetCompleted, metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully").Obj().Status
	if err := h.client.Status().Update(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	h.clock.SetTime(t0.Add(time.Minute))
	h.reconcile(tj)
	got := h.trainJob(tj)
	want := []trainer.JobStatus{{Name: "node", Ready: ptr.To[int32](0), Succeeded: ptr.To[int32](1), Failed: ptr.To[int32](0), Active: ptr.To[int32](0), Suspended: ptr.To[int32](0)}}
	if diff := cmp.Diff(want, got.Status.JobsStatus); diff != "" {
		t.Errorf("jobsStatus (-want +got):\n%s", diff)
	}
	if c := condition(got, trainer.TrainJobComplete); c != "True/AllJobsCompleted" {
		t.Errorf("Complete %q, want True/AllJobsCompleted", c)
	}
	if diff := cmp.Diff(ptr.To(metav1.NewTime(t0.Add(time.Minute))), got.Status.CompletionTime); diff != "" {
		t.Errorf("completionTime (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Normal " + ReasonCompleted}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestReconcileRuntimeNotFoundThenFound(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").Obj()
	h := newHarness(t, tj)
	if diff := cmp.Diff(reconcile.Result{}, h.reconcile(tj)); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if c := condition(h.trainJob(tj), trainer.TrainJobFailed); c != "True/"+trainer.TrainJobRuntimeNotFoundReason {
		t.Errorf("Failed %q, want True/RuntimeNotFound", c)
	}
	if diff := cmp.Diff([]string{"Warning " + ReasonRuntimeNotFound}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	if err := h.client.Create(context.Background(), torch.ClusterTrainingRuntime()); err != nil {
		t.Fatal(err)
	}
	h.created(tj)
	if c := condition(h.trainJob(tj), trainer.TrainJobFailed); c != "False/"+trainer.TrainJobRuntimeFoundReason {
		t.Errorf("Failed %q, want False/RuntimeFound", c)
	}
	if h.jobSet(tj) == nil {
		t.Error("no JobSet once the runtime exists")
	}
}

func TestReconcileBatchesMirrorOnlyChanges(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").NumNodes(2).Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())
	h.created(tj)
	setPods := func(ready, active int32) {
		t.Helper()
		js := h.jobSet(tj)
		js.Status.ReplicatedJobsStatus = kilntesting.MakeJobSet(tj).ReplicatedJobStatus("node", ready, 0, 0, active, 0).Status.ReplicatedJobsStatus
		if err := h.client.Status().Update(context.Background(), js); err != nil {
			t.Fatal(err)
		}
	}
	jobs := func(ready, active int32) []trainer.JobStatus {
		return []trainer.JobStatus{{Name: "node", Ready: ptr.To(ready), Succeeded: ptr.To[int32](0), Failed: ptr.To[int32](0), Active: ptr.To(active), Suspended: ptr.To[int32](0)}}
	}

	// Its pods active and not yet ready (images pulling): a state a client may wait for,
	// written at once, as is the next one, every pod ready.
	setPods(0, 2)
	if diff := cmp.Diff(reconcile.Result{}, h.reconcile(tj)); diff != "" {
		t.Errorf("a transition of the pods' state waits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(jobs(0, 2), h.trainJob(tj).Status.JobsStatus, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("active, not ready, not written at once (-want +got):\n%s", diff)
	}
	setPods(1, 2)
	h.reconcile(tj)
	if diff := cmp.Diff(jobs(1, 2), h.trainJob(tj).Status.JobsStatus, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the first pod ready, not written at once (-want +got):\n%s", diff)
	}

	// A count that moves within the state (the second pod ready) waits for its batch.
	setPods(2, 2)
	res := h.reconcile(tj)
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: statusBatchPeriod}, res); diff != "" {
		t.Errorf("a mirror-only change waits for its batch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(jobs(1, 2), h.trainJob(tj).Status.JobsStatus, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("written before its batch ended (-want +got):\n%s", diff)
	}
	h.clock.SetTime(t0.Add(statusBatchPeriod))
	if diff := cmp.Diff(reconcile.Result{}, h.reconcile(tj)); diff != "" {
		t.Errorf("batch over (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(jobs(2, 2), h.trainJob(tj).Status.JobsStatus, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("jobsStatus after the batch (-want +got):\n%s", diff)
	}
}

func TestReconcileSkipsJobsManagedElsewhere(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").ManagedBy("example.com/other").Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())
	h.reconcile(tj)
	if h.jobSet(tj) != nil {
		t.Error("a JobSet was created for a TrainJob managed by another controller")
	}
	if diff := cmp.Diff(trainer.TrainJobStatus{}, h.trainJob(tj).Status, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("status of a TrainJob managed elsewhere changed (-want +got):\n%s", diff)
	}
}

func TestReconcileJobSetRefusedForGood(t *testing.T) {
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "job",
		errors.New(`admission webhook "vjobset.kb.io" denied the request: JobSet name is too long, job names generated for this JobSet will exceed 63 characters`))
	quota := apierrors.NewForbidden(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "job",
		errors.New("exceeded quota: jobsets, requested: count/jobsets.jobset.x-k8s.io=1, used: 10, limited: 10"))
	for name, tc := range map[string]struct {
		applyErr   error
		wantFailed string
		wantErr    bool
		wantEvents []string
	}{
		"denied by JobSet's webhook: fails for good": {applyErr: denied, wantFailed: "True/" + trainer.TrainJobJobSetRejectedReason, wantEvents: []string{"Warning " + trainer.TrainJobJobSetRejectedReason}},
		"invalid: fails for good": {
			applyErr:   apierrors.NewInvalid(schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}, "job", nil),
			wantFailed: "True/" + trainer.TrainJobJobSetRejectedReason, wantEvents: []string{"Warning " + trainer.TrainJobJobSetRejectedReason},
		},
		"an exceeded quota: retried": {applyErr: quota, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			tj := kilntesting.MakeTrainJob("job", "ns").Obj()
			h := newHarness(t, tj, torch.ClusterTrainingRuntime())
			h.r.client = interceptor.NewClient(h.client.(client.WithWatch), interceptor.Funcs{
				Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
					if ac, ok := obj.(interface{ GetKind() string }); ok && ac.GetKind() == "JobSet" {
						return tc.applyErr
					}
					return c.Apply(ctx, obj, opts...)
				},
			})
			_, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tj)})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error %v, want one: %v", err, tc.wantErr)
			}
			got := h.trainJob(tj)
			if c := condition(got, trainer.TrainJobFailed); c != tc.wantFailed {
				t.Errorf("Failed %q, want %q", c, tc.wantFailed)
			}
			if diff := cmp.Diff(tc.wantEvents, h.recorded()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if tc.wantFailed != "" && got.Status.CompletionTime == nil {
				t.Error("a TrainJob failed for good has no completionTime (its TTL would never start)")
			}
		})
	}
}

func TestReconcileJobSetRetriesBecomeVisible(t *testing.T) {
	busy := apierrors.NewServerTimeout(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "apply", 1)
	tj := kilntesting.MakeTrainJob("job", "ns").Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())
	failing := true
	h.r.client = interceptor.NewClient(h.client.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if ac, ok := obj.(interface{ GetKind() string }); ok && ac.GetKind() == "JobSet" && failing {
				return busy
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	var got []string
	for attempt := 1; attempt <= 16; attempt++ {
		if _, err := h.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err == nil {
			t.Fatalf("attempt %d: no error, want the apiserver's, for a retry with backoff", attempt)
		}
		for _, e := range h.recorded() {
			got = append(got, fmt.Sprintf("%d %s", attempt, e))
		}
	}
	if diff := cmp.Diff([]string{"8 Warning " + ReasonJobSetRetrying, "16 Warning " + ReasonJobSetRetrying}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if c := condition(h.trainJob(tj), trainer.TrainJobFailed); c != "" {
		t.Errorf("a job whose JobSet write is retried got Failed %q", c)
	}
	failing = false
	h.reconcile(tj)
	if h.jobSet(tj) == nil {
		t.Error("no JobSet once the apiserver answers")
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{}, h.r.retries.m, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("retries still counted after a success (-want +got):\n%s", diff)
	}
}

// failedFirst refuses to delete a JobSet while its TrainJob is not stored as failed.
type failedFirst struct {
	client.Client
	t  *testing.T
	tj client.ObjectKey
}

func (f failedFirst) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if _, ok := obj.(*jobsetv1alpha2.JobSet); ok {
		tj := &trainer.TrainJob{}
		if err := f.Get(ctx, f.tj, tj); err != nil || condition(tj, trainer.TrainJobFailed) != "True/"+trainer.TrainJobDeadlineExceededReason {
			f.t.Errorf("JobSet %s deleted before its TrainJob's failure was stored (read: %v)", obj.GetName(), err)
		}
	}
	return f.Client.Delete(ctx, obj, opts...)
}

// A queued job's JobSet waits suspended; what Kueue patches in at admission (node selectors)
// reaches it in the one update that resumes it, not in an update of its own.
func TestReconcileDefersChangesOfASuspendedJobSetToItsResume(t *testing.T) {
	tj := kilntesting.MakeTrainJob("job", "ns").Queue("default").Suspend(true).Obj()
	h := newHarness(t, tj, torch.ClusterTrainingRuntime())
	h.reconcile(tj)
	created := h.jobSet(tj)
	if created == nil || !ptr.Deref(created.Spec.Suspend, false) {
		t.Fatalf("a queued job's JobSet: %v, want one created suspended", created)
	}

	got := h.trainJob(tj)
	got.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: trainer.KueueManager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
			Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"kiln.dev/node-pool": "gpu"}}},
		}}}}},
	}}}}
	if err := h.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	h.reconcile(tj)
	if js := h.jobSet(tj); js.ResourceVersion != created.ResourceVersion {
		t.Errorf("the suspended JobSet was written while its job stayed suspended (resourceVersion %s, then %s)", created.ResourceVersion, js.ResourceVersion)
	}

	got = h.trainJob(tj)
	got.Spec.Suspend = ptr.To(false)
	if err := h.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	h.reconcile(tj)
	js := h.jobSet(tj)
	if ptr.Deref(js.Spec.Suspend, true) {
		t.Error("JobSet still suspended after the resume")
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == "node" && rj.Template.Spec.Template.Spec.NodeSelector["kiln.dev/node-pool"] != "gpu" {
			t.Errorf("the resumed JobSet's pods lack Kueue's node selector: %v", rj.Template.Spec.Template.Spec.NodeSelector)
		}
	}
}
