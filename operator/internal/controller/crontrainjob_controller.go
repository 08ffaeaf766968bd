package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/kiln-ml/kiln/api/kiln/schedule"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// +kubebuilder:rbac:groups=kiln.dev,resources=crontrainjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=kiln.dev,resources=crontrainjobs/status,verbs=get;update;patch
// Runs are owned with blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
// admission plugin allows only to who may update the owner's finalizers.
// +kubebuilder:rbac:groups=kiln.dev,resources=crontrainjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;delete

// Reasons of the CronTrainJob controller's events and condition.
const (
	ReasonInvalidSchedule  = "InvalidSchedule"
	ReasonScheduled        = "Scheduled"
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonJobAlreadyActive = "JobAlreadyActive"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonMissedSchedules  = "MissedSchedules"
	ReasonTooManyMissed    = "TooManyMissedTimes"
	CronConditionReady     = "Ready"
)

// CronTrainJobReconciler creates a CronTrainJob's runs as they fall due, with the CronJob
// controller's semantics. It keeps no timers: each reconcile reads the time, creates what
// is due and asks to be called again at the next scheduled time, so a restart loses
// nothing; and each run's name is derived from its scheduled time, so a restart or a retry
// finds the run it created instead of creating another.
type CronTrainJobReconciler struct {
	client   client.Client
	recorder events.EventRecorder
	clock    clock.PassiveClock
	// skipped and missed remember which due instant's skip and misses were counted in the
	// metrics: every reconcile until the run is created finds the same instant due again.
	skipped, missed dueSeen
}

// dueSeen is, per CronTrainJob, the latest due instant something was counted for.
type dueSeen struct {
	mu sync.Mutex
	m  map[types.NamespacedName]time.Time
}

// first reports whether due is new for cj, and remembers it.
func (d *dueSeen) first(cj types.NamespacedName, due time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[types.NamespacedName]time.Time{}
	}
	if d.m[cj].Equal(due) {
		return false
	}
	d.m[cj] = due
	return true
}

func (d *dueSeen) forget(cj types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, cj)
}

// NewCronTrainJobReconciler returns the reconciler; clk tells it the time.
func NewCronTrainJobReconciler(c client.Client, rec events.EventRecorder, clk clock.PassiveClock) *CronTrainJobReconciler {
	return &CronTrainJobReconciler{client: c, recorder: rec, clock: clk}
}

// SetupWithManager watches CronTrainJobs and the TrainJobs they own.
func (r *CronTrainJobReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("crontrainjob").
		For(&kiln.CronTrainJob{}).
		Owns(&trainer.TrainJob{}).
		WithOptions(opts).
		Complete(r)
}

// run is one TrainJob of a CronTrainJob and when it was scheduled.
type run struct {
	job       *trainer.TrainJob
	scheduled time.Time
}

// runOutcome says whether a run finished (as finished does) and whether it failed.
func runOutcome(tj *trainer.TrainJob) (done, failed bool) {
	if !finished(&tj.Status) {
		return false, false
	}
	return true, !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete)
}

// Reconcile implements reconcile.Reconciler.
func (r *CronTrainJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cj := &kiln.CronTrainJob{}
	if err := r.client.Get(ctx, req.NamespacedName, cj); err != nil {
		if apierrors.IsNotFound(err) {
			r.skipped.forget(req.NamespacedName)
			r.missed.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	now := r.clock.Now()
	before := cj.Status.DeepCopy()

	runs, err := r.runs(ctx, cj)
	if err != nil {
		return ctrl.Result{}, err
	}
	var active, succeeded, failedRuns []run
	for _, rn := range runs {
		switch done, failed := runOutcome(rn.job); {
		case !done:
			active = append(active, rn)
		case failed:
			failedRuns = append(failedRuns, rn)
		default:
			succeeded = append(succeeded, rn)
			if c := meta.FindStatusCondition(rn.job.Status.Conditions, trainer.TrainJobComplete); c != nil &&
				(cj.Status.LastSuccessfulTime == nil || c.LastTransitionTime.After(cj.Status.LastSuccessfulTime.Time)) {
				cj.Status.LastSuccessfulTime = ptr.To(c.LastTransitionTime)
			}
		}
	}
	// History: the oldest finished runs past the limits go (their TrainJobs' owners delete what they own).
	if err := r.trim(ctx, cj, succeeded, ptr.Deref(cj.Spec.SuccessfulJobsHistoryLimit, 3)); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.trim(ctx, cj, failedRuns, ptr.Deref(cj.Spec.FailedJobsHistoryLimit, 1)); err != nil {
		return ctrl.Result{}, err
	}

	sched, err := schedule.Parse(cj.Spec.Schedule, ptr.Deref(cj.Spec.TimeZone, ""))
	if err != nil {
		// The webhook refuses such a schedule; one stored before it existed waits for a fix.
		setActive(cj, active)
		r.setReady(cj, metav1.ConditionFalse, ReasonInvalidSchedule, fmt.Sprintf("spec.schedule or spec.timeZone: %v", err))
		return ctrl.Result{}, r.writeStatus(ctx, cj, before)
	}
	if ptr.Deref(cj.Spec.Suspend, false) {
		setActive(cj, active)
		r.setReady(cj, metav1.ConditionTrue, "Suspended", "suspended: no new runs until it is resumed")
		return ctrl.Result{}, r.writeStatus(ctx, cj, before)
	}

	since := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		since = cj.Status.LastScheduleTime.Time
	}
	deadline := time.Duration(ptr.Deref(cj.Spec.StartingDeadlineSeconds, 0)) * time.Second
	due, missed, err := sched.Due(since, now, deadline)
	if err != nil {
		r.recorder.Eventf(cj, nil, corev1.EventTypeWarning, ReasonTooManyMissed, "Schedule", "%v; running the latest, %s", err, due.UTC().Format(time.RFC3339))
	}
	if missed > 1 && r.missed.first(req.NamespacedName, due) {
		cronMissed.Add(float64(missed - 1))
	}
	if err == nil && missed > 1 {
		r.recorder.Eventf(cj, nil, corev1.EventTypeNormal, ReasonMissedSchedules, "Schedule",
			"%d scheduled times passed while no run could be created; running the latest, %s", missed, due.UTC().Format(time.RFC3339))
	}
	next := sched.Next(now)
	result := ctrl.Result{}
	if !next.IsZero() {
		// A little after the scheduled time, so that the clock has surely passed it.
		result.RequeueAfter = next.Sub(now) + 100*time.Millisecond
	}
	r.setReady(cj, metav1.ConditionTrue, ReasonScheduled, "next run at "+next.UTC().Format(time.RFC3339))
	if due.IsZero() {
		setActive(cj, active)
		return result, r.writeStatus(ctx, cj, before)
	}

	name := kiln.RunName(cj.Name, due)
	if slices.ContainsFunc(runs, func(rn run) bool { return rn.job.Name == name }) {
		// Created already (by an earlier reconcile whose status write was lost).
		cj.Status.LastScheduleTime = &metav1.Time{Time: due}
		setActive(cj, active)
		return result, r.writeStatus(ctx, cj, before)
	}
	switch cj.Spec.ConcurrencyPolicy {
	case kiln.ForbidConcurrent:
		if len(active) > 0 {
			// As CronJob: the time stays due, and runs when the active one has finished,
			// if still within startingDeadlineSeconds.
			if r.skipped.first(req.NamespacedName, due) {
				cronRuns.WithLabelValues(RunSkipped).Inc()
			}
			r.recorder.Eventf(cj, nil, corev1.EventTypeNormal, ReasonJobAlreadyActive, "Skip",
				"Not starting the run of %s: %s is still active (concurrencyPolicy: Forbid)", due.UTC().Format(time.RFC3339), active[0].job.Name)
			setActive(cj, active)
			return result, r.writeStatus(ctx, cj, before)
		}
	case kiln.ReplaceConcurrent:
		for _, rn := range active {
			if err := r.client.Delete(ctx, rn.job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
			cronRuns.WithLabelValues(RunReplaced).Inc()
			r.recorder.Eventf(cj, rn.job, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Delete",
				"Deleted active run %s to start the run of %s (concurrencyPolicy: Replace)", rn.job.Name, due.UTC().Format(time.RFC3339))
		}
		active = nil
	}

	tj := cj.NewRun(due)
	if err := r.client.Create(ctx, tj); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			cronRuns.WithLabelValues(RunCreateFailed).Inc()
			r.recorder.Eventf(cj, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "Creating the run of %s: %v", due.UTC().Format(time.RFC3339), err)
			return ctrl.Result{}, err
		}
	} else {
		cronRuns.WithLabelValues(RunCreated).Inc()
		cronLag.Observe(seconds(now.Sub(due)))
		r.recorder.Eventf(cj, tj, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Create", "Created TrainJob %s, the run of %s", name, due.UTC().Format(time.RFC3339))
	}
	cj.Status.LastScheduleTime = &metav1.Time{Time: due}
	setActive(cj, append(active, run{job: tj, scheduled: due}))
	return result, r.writeStatus(ctx, cj, before)
}

// runs are the TrainJobs the CronTrainJob owns, oldest scheduled first.
func (r *CronTrainJobReconciler) runs(ctx context.Context, cj *kiln.CronTrainJob) ([]run, error) {
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

func (r *CronTrainJobReconciler) trim(ctx context.Context, cj *kiln.CronTrainJob, runs []run, limit int32) error {
	for i := 0; i < len(runs)-int(limit); i++ {
		if err := r.client.Delete(ctx, runs[i].job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.recorder.Eventf(cj, runs[i].job, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Delete", "Deleted finished run %s (history limit %d)", runs[i].job.Name, limit)
	}
	return nil
}

func setActive(cj *kiln.CronTrainJob, active []run) {
	cj.Status.Active = nil
	for _, rn := range active {
		cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{
			APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob", Namespace: rn.job.Namespace, Name: rn.job.Name, UID: rn.job.UID,
		})
	}
	cj.Status.ActiveCount = int32(len(cj.Status.Active))
}

func (r *CronTrainJobReconciler) setReady(cj *kiln.CronTrainJob, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&cj.Status.Conditions, metav1.Condition{
		Type: CronConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: cj.Generation,
	})
}

func (r *CronTrainJobReconciler) writeStatus(ctx context.Context, cj *kiln.CronTrainJob, before *kiln.CronTrainJobStatus) error {
	// Conditions keep their transition time while their status stands, so an unchanged
	// status compares equal.
	if apiequality.Semantic.DeepEqual(before, &cj.Status) {
		return nil
	}
	return r.client.Status().Update(ctx, cj)
}
