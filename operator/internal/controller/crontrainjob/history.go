package crontrainjob

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// The history of a CronTrainJob: its runs by outcome, lastSuccessfulTime, and the oldest
// finished runs past successfulJobsHistoryLimit (default 3) and failedJobsHistoryLimit
// (default 1) deleted, as CronJob does.

// run is one TrainJob of a CronTrainJob and when it was scheduled.
type run struct {
	job       *trainer.TrainJob
	scheduled time.Time
}

// history is a CronTrainJob's runs by outcome, each oldest scheduled first.
type history struct {
	active, succeeded, failed []run
}

// runs are the TrainJobs the CronTrainJob owns, oldest scheduled first.
func (r *Reconciler) runs(ctx context.Context, cj *kiln.CronTrainJob) ([]run, error) {
	list := &trainer.TrainJobList{}
	if err := r.client.List(ctx, list, client.InNamespace(cj.Namespace), client.MatchingLabels{kiln.LabelCronTrainJob: cj.Name}); err != nil {
		return nil, err
	}
	var out []run
	for i := range list.Items {
		tj := &list.Items[i]
		if !metav1.IsControlledBy(tj, cj) {
			continue
		}
		at, ok := kiln.ScheduledTimeOf(cj.Name, tj.Name)
		if !ok {
			at = tj.CreationTimestamp.Time
		}
		out = append(out, run{job: tj, scheduled: at})
	}
	slices.SortFunc(out, func(a, b run) int { return a.scheduled.Compare(b.scheduled) })
	return out, nil
}

// runOutcome says whether a run finished (as finished does) and whether it failed.
func runOutcome(tj *trainer.TrainJob) (done, failed bool) {
	if !trainer.Finished(&tj.Status) {
		return false, false
	}
	return true, !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)
}

// sortRuns sorts the runs by outcome, and moves st.lastSuccessfulTime to the latest
// completion of a successful run.
func sortRuns(runs []run, st *kiln.CronTrainJobStatus) history {
	var h history
	for _, rn := range runs {
		switch done, failed := runOutcome(rn.job); {
		case !done:
			h.active = append(h.active, rn)
		case failed:
			h.failed = append(h.failed, rn)
		default:
			h.succeeded = append(h.succeeded, rn)
			if c := meta.FindStatusCondition(rn.job.Status.Conditions, trainer.TrainJobComplete); c != nil &&
				(st.LastSuccessfulTime == nil || c.LastTransitionTime.After(st.LastSuccessfulTime.Time)) {
				st.LastSuccessfulTime = ptr.To(c.LastTransitionTime)
			}
		}
	}
	return h
}

// trimHistory deletes the oldest finished runs past the history limits (their TrainJobs'
// owner references delete what they own), and returns the events of the deletions made.
func (r *Reconciler) trimHistory(ctx context.Context, cj *kiln.CronTrainJob, h history) ([]cronEvent, error) {
	evs, err := r.trim(ctx, h.succeeded, ptr.Deref(cj.Spec.SuccessfulJobsHistoryLimit, 3))
	if err != nil {
		return evs, fmt.Errorf("deleting a successful run past the history limit: %w", err)
	}
	failed, err := r.trim(ctx, h.failed, ptr.Deref(cj.Spec.FailedJobsHistoryLimit, 1))
	evs = append(evs, failed...)
	if err != nil {
		return evs, fmt.Errorf("deleting a failed run past the history limit: %w", err)
	}
	return evs, nil
}

// trim deletes the oldest of runs past limit.
func (r *Reconciler) trim(ctx context.Context, runs []run, limit int32) ([]cronEvent, error) {
	var evs []cronEvent
	for i := 0; i < len(runs)-int(limit); i++ {
		if err := r.client.Delete(ctx, runs[i].job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return evs, err
		}
		evs = append(evs, cronEvent{kind: corev1.EventTypeNormal, reason: ReasonSuccessfulDelete, action: actionDelete, related: runs[i].job, ofWrite: true,
			note: fmt.Sprintf("Deleted finished run %s (history limit %d)", runs[i].job.Name, limit)})
	}
	return evs, nil
}
