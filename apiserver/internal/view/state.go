package view

import (
	"cmp"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Reasons of states that no Kubernetes condition names.
const (
	ReasonQueued      = "Pending"
	ReasonAdmitted    = "Admitted"
	ReasonDeactivated = "Deactivated"
	ReasonStarting    = "Starting"
	ReasonRunning     = "Running"
)

// State is the one state a job is in, with a reason and a message a person can act on.
// Kueue's Workload (wl, nil when there is none or Kueue is absent) tells a job waiting for
// quota from one a user suspended: both are just "suspended" to the TrainJob.
func State(tj *trainer.TrainJob, wl *Workload) (kilnv1.State, string, string) {
	conds := tj.Status.Conditions
	if c := meta.FindStatusCondition(conds, trainer.TrainJobComplete); c != nil && c.Status == metav1.ConditionTrue {
		return kilnv1.State_STATE_COMPLETE, cmp.Or(c.Reason, "Complete"), c.Message
	}
	if c := meta.FindStatusCondition(conds, trainer.TrainJobFailed); c != nil && c.Status == metav1.ConditionTrue {
		return kilnv1.State_STATE_FAILED, cmp.Or(c.Reason, "Failed"), c.Message
	}
	queued := tj.Labels[trainer.KueueQueueNameLabel] != ""
	// A deactivated workload is a suspend a user asked for: it is the job's state from the
	// moment it is asked, also while Kueue is still evicting the running job.
	if queued && wl != nil && !wl.Active {
		if !ptr.Deref(tj.Spec.Suspend, false) {
			return kilnv1.State_STATE_SUSPENDED, ReasonDeactivated, "suspending: Kueue stops its pods and releases its quota; resume it to queue it again"
		}
		return kilnv1.State_STATE_SUSPENDED, ReasonDeactivated, "suspended: its Kueue workload is deactivated; resume it to queue it again"
	}
	if ptr.Deref(tj.Spec.Suspend, false) {
		switch {
		case queued && wl != nil && wl.Admitted:
			return kilnv1.State_STATE_QUEUED, ReasonAdmitted, fmt.Sprintf("admitted by ClusterQueue %s; starting", wl.ClusterQueue)
		case queued && wl != nil && wl.EvictedReason != "":
			return kilnv1.State_STATE_QUEUED, wl.EvictedReason, cmp.Or(wl.EvictedMessage, "evicted by Kueue") + "; waiting to be admitted again"
		case queued && wl != nil && wl.PendingMessage != "":
			return kilnv1.State_STATE_QUEUED, ReasonQueued, wl.waitingMessage()
		case queued:
			return kilnv1.State_STATE_QUEUED, ReasonQueued, fmt.Sprintf("waiting in queue %s for Kueue to admit it", tj.Labels[trainer.KueueQueueNameLabel])
		default:
			return kilnv1.State_STATE_SUSPENDED, trainer.TrainJobSuspendedReason, "suspended: resume it to run"
		}
	}
	if ready, total := readyJobs(tj); ready > 0 {
		return kilnv1.State_STATE_RUNNING, ReasonRunning, fmt.Sprintf("%d of %d jobs ready", ready, max(total, ready))
	}
	return kilnv1.State_STATE_RUNNING, ReasonStarting, "started; waiting for its pods to run"
}

// readyJobs counts the job's child Jobs that are ready or done, of those started.
func readyJobs(tj *trainer.TrainJob) (ready, total int32) {
	for _, js := range tj.Status.JobsStatus {
		ready += ptr.Deref(js.Ready, 0) + ptr.Deref(js.Succeeded, 0)
		total += ptr.Deref(js.Active, 0) + ptr.Deref(js.Succeeded, 0)
	}
	return ready, total
}

// The statuses of TrainJobStatus.status: the Kubeflow SDK's words, and Kiln's own two.
const (
	StatusCreated   = "Created"
	StatusQueued    = "Queued"
	StatusSuspended = "Suspended"
	StatusRunning   = "Running"
	StatusComplete  = "Complete"
	StatusFailed    = "Failed"
)

// Statuses are the words of TrainJobStatus.status, in the order a job passes them.
var Statuses = []string{StatusCreated, StatusQueued, StatusSuspended, StatusRunning, StatusComplete, StatusFailed}

// Status says state in the Kubeflow SDK's words, the one place they are mapped: Kubeflow
// calls a job Running only once every training node runs (or is done), and Created before.
// Queued and Suspended are Kiln's: Kubeflow's SDK would say Created.
func Status(tj *trainer.TrainJob, state kilnv1.State) string {
	switch state {
	case kilnv1.State_STATE_QUEUED:
		return StatusQueued
	case kilnv1.State_STATE_SUSPENDED:
		return StatusSuspended
	case kilnv1.State_STATE_COMPLETE:
		return StatusComplete
	case kilnv1.State_STATE_FAILED:
		return StatusFailed
	case kilnv1.State_STATE_RUNNING:
		if ready, total := readyJobs(tj); ready > 0 && ready >= total {
			return StatusRunning
		}
	}
	return StatusCreated
}
