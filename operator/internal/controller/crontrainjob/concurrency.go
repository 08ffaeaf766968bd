package crontrainjob

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
)

// The concurrency policy, when a run is due while earlier ones are active (queued in Kueue,
// suspended or running): Allow starts it beside them; Forbid holds it back, and the time
// stays due until they finish (within startingDeadlineSeconds, if set); Replace deletes
// them first. The run is named after its scheduled time (kiln.RunName), so a run that
// exists already was created by an earlier reconcile whose status write was lost.

// startDue starts the run due at due, as the concurrency policy allows, and sets
// st.lastScheduleTime once it exists. It returns the runs active afterwards, and the
// events of what it did (even when it fails: of the writes made before).
func (r *Reconciler) startDue(ctx context.Context, cj *kiln.CronTrainJob, st *kiln.CronTrainJobStatus, runs, active []run, due, now time.Time) ([]run, []cronEvent, error) {
	at := due.UTC().Format(time.RFC3339)
	name := kiln.RunName(cj.Name, due)
	if slices.ContainsFunc(runs, func(rn run) bool { return rn.job.Name == name }) {
		st.LastScheduleTime = &metav1.Time{Time: due}
		return active, nil, nil
	}
	var evs []cronEvent
	switch cj.Spec.ConcurrencyPolicy {
	case kiln.ForbidConcurrent:
		if len(active) > 0 {
			if r.skipped.first(client.ObjectKeyFromObject(cj), due) {
				cronRuns.WithLabelValues(RunSkipped).Inc()
			}
			evs = append(evs, cronEvent{kind: corev1.EventTypeNormal, reason: ReasonJobAlreadyActive, action: actionSkip,
				note: fmt.Sprintf("Not starting the run of %s: %s is still active (concurrencyPolicy: Forbid)", at, active[0].job.Name)})
			return active, evs, nil
		}
	case kiln.ReplaceConcurrent:
		for _, rn := range active {
			if err := r.client.Delete(ctx, rn.job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return active, evs, fmt.Errorf("deleting active run %s to replace it: %w", rn.job.Name, err)
			}
			cronRuns.WithLabelValues(RunReplaced).Inc()
			evs = append(evs, cronEvent{kind: corev1.EventTypeNormal, reason: ReasonSuccessfulDelete, action: actionDelete, related: rn.job, ofWrite: true,
				note: fmt.Sprintf("Deleted active run %s to start the run of %s (concurrencyPolicy: Replace)", rn.job.Name, at)})
		}
		active = nil
	}

	tj := cj.NewRun(due)
	switch err := r.client.Create(ctx, tj); {
	case apierrors.IsAlreadyExists(err):
		// Created by an earlier reconcile that the cache did not show yet.
	case err != nil:
		cronRuns.WithLabelValues(RunCreateFailed).Inc()
		evs = append(evs, cronEvent{kind: corev1.EventTypeWarning, reason: ReasonFailedCreate, action: actionCreate, ofWrite: true,
			note: fmt.Sprintf("Creating the run of %s: %v", at, err)})
		return active, evs, fmt.Errorf("creating the run of %s: %w", at, err)
	default:
		cronRuns.WithLabelValues(RunCreated).Inc()
		cronLag.Observe(seconds(now.Sub(due)))
		klog.FromContext(ctx).V(2).Info("Created run", "trainJob", klog.KObj(tj), "scheduledTime", at)
		evs = append(evs, cronEvent{kind: corev1.EventTypeNormal, reason: ReasonSuccessfulCreate, action: actionCreate, related: tj, ofWrite: true,
			note: fmt.Sprintf("Created TrainJob %s, the run of %s", name, at)})
	}
	st.LastScheduleTime = &metav1.Time{Time: due}
	return append(active, run{job: tj, scheduled: due}), evs, nil
}
