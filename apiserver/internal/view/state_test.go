package view

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestState(t *testing.T) {
	queued := map[string]string{trainer.KueueQueueNameLabel: "team"}
	cond := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: reason + " message"}
	}
	type want struct {
		state  kilnv1.State
		reason string
		status string // in the Kubeflow SDK's words
	}
	cases := map[string]struct {
		labels  map[string]string
		suspend bool
		conds   []metav1.Condition
		jobs    []trainer.JobStatus
		wl      *Workload
		want    want
	}{
		"complete wins over everything": {
			suspend: true, labels: queued, conds: []metav1.Condition{cond(trainer.TrainJobComplete, "AllJobsCompleted")},
			want: want{kilnv1.State_STATE_COMPLETE, "AllJobsCompleted", StatusComplete},
		},
		"deadline exceeded": {
			conds: []metav1.Condition{cond(trainer.TrainJobFailed, trainer.TrainJobDeadlineExceededReason)},
			want:  want{kilnv1.State_STATE_FAILED, trainer.TrainJobDeadlineExceededReason, StatusFailed},
		},
		"suspended by a user, no queue": {
			suspend: true, want: want{kilnv1.State_STATE_SUSPENDED, trainer.TrainJobSuspendedReason, StatusSuspended},
		},
		"queued, Kueue has no workload yet": {
			suspend: true, labels: queued, want: want{kilnv1.State_STATE_QUEUED, ReasonQueued, StatusQueued},
		},
		"queued, waiting for quota": {
			suspend: true, labels: queued,
			wl:   &Workload{Active: true, PendingReason: "Pending", PendingMessage: "couldn't assign flavors: insufficient quota"},
			want: want{kilnv1.State_STATE_QUEUED, ReasonQueued, StatusQueued},
		},
		"queued after preemption": {
			suspend: true, labels: queued, wl: &Workload{Active: true, EvictedReason: "Preempted"},
			want: want{kilnv1.State_STATE_QUEUED, "Preempted", StatusQueued},
		},
		"admitted, not started yet": {
			suspend: true, labels: queued, wl: &Workload{Active: true, Admitted: true, QuotaReserved: true},
			want: want{kilnv1.State_STATE_QUEUED, ReasonAdmitted, StatusQueued},
		},
		"deactivated in Kueue is suspended, not queued": {
			suspend: true, labels: queued, wl: &Workload{Active: false, EvictedReason: "Deactivated"},
			want: want{kilnv1.State_STATE_SUSPENDED, ReasonDeactivated, StatusSuspended},
		},
		"deactivated while it still runs is suspended at once": {
			labels: queued, wl: &Workload{Active: false, Admitted: true},
			jobs: []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](1), Ready: ptr.To[int32](1)}},
			want: want{kilnv1.State_STATE_SUSPENDED, ReasonDeactivated, StatusSuspended},
		},
		"running, pods starting": {
			jobs: []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](1), Ready: ptr.To[int32](0)}},
			want: want{kilnv1.State_STATE_RUNNING, ReasonStarting, StatusCreated},
		},
		"running on one of its two jobs is Created to Kubeflow": {
			labels: queued, wl: &Workload{Active: true, Admitted: true},
			jobs: []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](1), Ready: ptr.To[int32](1)}, {Name: "launcher", Active: ptr.To[int32](1), Ready: ptr.To[int32](0)}},
			want: want{kilnv1.State_STATE_RUNNING, ReasonRunning, StatusCreated},
		},
		"initializers done, every node ready": {
			jobs: []trainer.JobStatus{{Name: "dataset-initializer", Succeeded: ptr.To[int32](1)}, {Name: "node", Active: ptr.To[int32](1), Ready: ptr.To[int32](1)}},
			want: want{kilnv1.State_STATE_RUNNING, ReasonRunning, StatusRunning},
		},
		"running": {
			labels: queued, wl: &Workload{Active: true, Admitted: true},
			jobs: []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](1), Ready: ptr.To[int32](1)}},
			want: want{kilnv1.State_STATE_RUNNING, ReasonRunning, StatusRunning},
		},
		"a missing runtime fails until it appears": {
			conds: []metav1.Condition{cond(trainer.TrainJobFailed, trainer.TrainJobRuntimeNotFoundReason)},
			want:  want{kilnv1.State_STATE_FAILED, trainer.TrainJobRuntimeNotFoundReason, StatusFailed},
		},
		"a runtime that appeared": {
			conds: []metav1.Condition{{Type: trainer.TrainJobFailed, Status: metav1.ConditionFalse, Reason: trainer.TrainJobRuntimeFoundReason}},
			want:  want{kilnv1.State_STATE_RUNNING, ReasonStarting, StatusCreated},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Labels: tc.labels},
				Spec:       trainer.TrainJobSpec{Suspend: ptr.To(tc.suspend)},
				Status:     trainer.TrainJobStatus{Conditions: tc.conds, JobsStatus: tc.jobs},
			}
			st, reason, msg := State(tj, tc.wl)
			if diff := cmp.Diff(tc.want, want{st, reason, Status(tj, st)}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("State() mismatch (-want +got):\n%s", diff)
			}
			if msg == "" && st != kilnv1.State_STATE_COMPLETE {
				t.Errorf("State() message is empty")
			}
		})
	}
}
