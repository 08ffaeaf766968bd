package trainjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// mirrored is the status MultiKueue copies from a worker: conditions with the worker's
// transition times, counts, and no startTime or completionTime (dropped by Kueue's types).
func mirrored(conds []metav1.Condition, active int32) trainer.TrainJobStatus {
	return trainer.TrainJobStatus{
		Conditions: conds,
		JobsStatus: []trainer.JobStatus{{Name: "node", Active: ptr.To(active), Ready: ptr.To(active), Succeeded: ptr.To[int32](0), Failed: ptr.To[int32](0), Suspended: ptr.To[int32](0)}},
	}
}

func cond(t string, s metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
}

func TestDispatchedStatus(t *testing.T) {
	resumed := cond(trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason, t0)
	complete := cond(trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", t0.Add(time.Minute))
	dispatched := func(suspend bool, st trainer.TrainJobStatus) *trainer.TrainJob {
		tj := kilntesting.MakeTrainJob("job", "ns").ManagedBy(trainer.MultiKueueControllerName).Suspend(suspend).Obj()
		tj.Status = st
		return tj
	}
	cases := map[string]struct {
		tj       *trainer.TrainJob
		cluster  string
		admitted *time.Time
		want     trainer.TrainJobStatus
	}{
		"queued on the manager": {
			tj: dispatched(true, trainer.TrainJobStatus{}),
			want: trainer.TrainJobStatus{Conditions: []metav1.Condition{{
				Type: trainer.TrainJobSuspended, Status: metav1.ConditionTrue, Reason: trainer.TrainJobSuspendedReason, Message: trainer.TrainJobSuspendedMessage, ObservedGeneration: 1,
			}}},
		},
		"running on a worker: started when the worker resumed it": {
			tj:      dispatched(false, mirrored([]metav1.Condition{resumed}, 2)),
			cluster: "worker-1",
			want: func() trainer.TrainJobStatus {
				st := mirrored([]metav1.Condition{resumed}, 2)
				st.StartTime = ptr.To(metav1.NewTime(t0))
				return st
			}(),
		},
		"finished on a worker: completed when the worker said so": {
			tj:      dispatched(false, mirrored([]metav1.Condition{resumed, complete}, 0)),
			cluster: "worker-1",
			want: func() trainer.TrainJobStatus {
				st := mirrored([]metav1.Condition{resumed, complete}, 0)
				st.StartTime = ptr.To(metav1.NewTime(t0))
				st.CompletionTime = ptr.To(metav1.NewTime(t0.Add(time.Minute)))
				return st
			}(),
		},
		// Its Kueue resumed the worker's copy before its Kiln wrote Suspended (make test saw
		// it once): no Resumed transition is mirrored.
		"running on a worker that showed no suspension: started when its Workload was admitted": {
			tj:       dispatched(false, mirrored(nil, 2)),
			cluster:  "worker-1",
			admitted: ptr.To(t0.Add(5 * time.Second)),
			want: func() trainer.TrainJobStatus {
				st := mirrored(nil, 2)
				st.StartTime = ptr.To(metav1.NewTime(t0.Add(5 * time.Second)))
				return st
			}(),
		},
		"finished on a worker that showed no suspension: started when admitted, completed when the worker said so": {
			tj:       dispatched(false, mirrored([]metav1.Condition{complete}, 0)),
			cluster:  "worker-1",
			admitted: ptr.To(t0.Add(5 * time.Second)),
			want: func() trainer.TrainJobStatus {
				st := mirrored([]metav1.Condition{complete}, 0)
				st.StartTime = ptr.To(metav1.NewTime(t0.Add(5 * time.Second)))
				st.CompletionTime = ptr.To(metav1.NewTime(t0.Add(time.Minute)))
				return st
			}(),
		},
		"admitted on the manager only after the worker finished: started no later than it finished": {
			tj:       dispatched(false, mirrored([]metav1.Condition{complete}, 0)),
			cluster:  "worker-1",
			admitted: ptr.To(t0.Add(2 * time.Minute)),
			want: func() trainer.TrainJobStatus {
				st := mirrored([]metav1.Condition{complete}, 0)
				st.StartTime = ptr.To(metav1.NewTime(t0.Add(time.Minute)))
				st.CompletionTime = ptr.To(metav1.NewTime(t0.Add(time.Minute)))
				return st
			}(),
		},
		"the worker's resume wins over the admission": {
			tj:       dispatched(false, mirrored([]metav1.Condition{resumed}, 2)),
			cluster:  "worker-1",
			admitted: ptr.To(t0.Add(5 * time.Second)),
			want: func() trainer.TrainJobStatus {
				st := mirrored([]metav1.Condition{resumed}, 2)
				st.StartTime = ptr.To(metav1.NewTime(t0))
				return st
			}(),
		},
		"evicted from a lost worker: its stale counts go to 0, Kueue can release the quota": {
			tj: dispatched(true, func() trainer.TrainJobStatus {
				st := mirrored([]metav1.Condition{resumed}, 2)
				st.StartTime = ptr.To(metav1.NewTime(t0))
				return st
			}()),
			want: func() trainer.TrainJobStatus {
				st := mirrored([]metav1.Condition{{
					Type: trainer.TrainJobSuspended, Status: metav1.ConditionTrue, Reason: trainer.TrainJobSuspendedReason, Message: trainer.TrainJobSuspendedMessage, ObservedGeneration: 1,
				}}, 0)
				return st
			}(),
		},
		"a finished job keeps its counts": {
			tj: dispatched(false, mirrored([]metav1.Condition{complete}, 1)),
			want: func() trainer.TrainJobStatus {
				st := mirrored([]metav1.Condition{complete}, 1)
				st.CompletionTime = ptr.To(metav1.NewTime(t0.Add(time.Minute)))
				return st
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := dispatchedStatus(tc.tj, tc.cluster, tc.admitted)
			if diff := cmp.Diff(tc.want, *got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("dispatchedStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconcileDispatchedTTL(t *testing.T) {
	failed := cond(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason, t0)
	tj := kilntesting.MakeTrainJob("job", "ns").UID("uid-1").Queue("multicluster").ManagedBy(trainer.MultiKueueControllerName).TTLSecondsAfterFinished(60).Obj()
	tj.Status = mirrored([]metav1.Condition{failed}, 0)
	wl := &kueuev1beta2.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "trainjob-job", Namespace: "ns", Labels: map[string]string{trainer.KueueJobUIDLabel: "uid-1"}},
		Status:     kueuev1beta2.WorkloadStatus{ClusterName: ptr.To("worker-2")},
	}
	h := newHarness(t, tj, wl, torch.ClusterTrainingRuntime())
	h.clock.SetTime(t0.Add(10 * time.Second))
	if diff := cmp.Diff(reconcile.Result{RequeueAfter: 50 * time.Second, Priority: ptr.To(timerPriority)}, h.reconcile(tj)); diff != "" {
		t.Errorf("before the TTL (-want +got):\n%s", diff)
	}
	if h.jobSet(tj) != nil {
		t.Error("the manager created a JobSet for a job MultiKueue runs on a worker")
	}
	if got := h.trainJob(tj).Status.CompletionTime; got == nil || !got.Time.Equal(t0) {
		t.Errorf("completionTime = %v, want the worker's failure at %v", got, t0)
	}
	h.clock.SetTime(t0.Add(60 * time.Second))
	h.reconcile(tj)
	if h.exists(tj) {
		t.Error("the TrainJob outlived its TTL")
	}
	if diff := cmp.Diff([]string{"Normal TTLExpired"}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestWorkerCopyLeavesTTLToTheManager(t *testing.T) {
	rt := kilntesting.MakeRuntime("ttl").RunPolicy(nil, ptr.To[int32](0)).ClusterTrainingRuntime()
	copyOf := kilntesting.MakeTrainJob("job", "ns").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "ttl").Label(trainer.KueueMultiKueueOriginLabel, "kiln-manager").
		Condition(trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", "").CompletionTime(t0).Obj()
	h := newHarness(t, copyOf, rt)
	h.reconcile(copyOf)
	if !h.exists(copyOf) {
		t.Error("a worker's copy of a dispatched job was deleted by its runtime's TTL: MultiKueue would create it again")
	}
}

// evicted is a dispatched job that ran on a worker (its mirrored status counts 2 active
// pods), now suspended by Kueue, whose Workload no worker holds: evicted for reason.
func evicted(reason, message string) (*trainer.TrainJob, *kueuev1beta2.Workload) {
	resumed := cond(trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason, t0)
	tj := kilntesting.MakeTrainJob("job", "ns").UID("uid-1").Queue("multicluster").ManagedBy(trainer.MultiKueueControllerName).Suspend(true).StartTime(t0).Obj()
	tj.Status = mirrored([]metav1.Condition{resumed}, 2)
	wl := &kueuev1beta2.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "trainjob-job", Namespace: "ns", Labels: map[string]string{trainer.KueueJobUIDLabel: "uid-1"}},
		Status: kueuev1beta2.WorkloadStatus{Conditions: []metav1.Condition{{
			Type: kueuev1beta2.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: reason, Message: message,
		}}},
	}
	return tj, wl
}

func TestReconcileDispatchedFromALostWorker(t *testing.T) {
	tj, wl := evicted(kueuev1beta2.WorkloadEvictedByAdmissionCheck, "Admitting remote lost")
	h := newHarness(t, tj, wl, torch.ClusterTrainingRuntime())
	h.reconcile(tj)
	if got := h.trainJob(tj).Status.JobsStatus[0].Active; ptr.Deref(got, -1) != 0 {
		t.Errorf("active = %v, want 0: no worker holds the job", got)
	}
	// Suspended is Kueue's to record (Stopped, with the eviction's reason).
	if diff := cmp.Diff([]string{"Warning WorkerLost"}, h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	h.reconcile(tj)
	if diff := cmp.Diff([]string(nil), h.recorded()); diff != "" {
		t.Errorf("events of the next reconcile (-want +got):\n%s", diff)
	}
}

func TestReconcileDispatchedSuspendedOnTheManager(t *testing.T) {
	tj, wl := evicted("Deactivated", "The workload is deactivated")
	h := newHarness(t, tj, wl, torch.ClusterTrainingRuntime())
	h.reconcile(tj)
	got := h.trainJob(tj)
	if ptr.Deref(got.Status.JobsStatus[0].Active, -1) != 0 || condition(got, trainer.TrainJobSuspended) != "True/Suspended" {
		t.Errorf("status = %+v: want no active pods and Suspended", got.Status)
	}
	// Kueue records the eviction on the TrainJob (Stopped); Kiln repeats none of it.
	if diff := cmp.Diff([]string(nil), h.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
