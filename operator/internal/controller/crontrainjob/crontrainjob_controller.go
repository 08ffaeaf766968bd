// Package crontrainjob is the CronTrainJob controller: it creates a CronTrainJob's runs
// (TrainJobs) as they fall due, with the CronJob controller's history limits, due times and
// concurrency policies.
package crontrainjob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// +kubebuilder:rbac:groups=kiln.dev,resources=crontrainjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=kiln.dev,resources=crontrainjobs/status,verbs=get;update;patch
// Runs are owned with blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
// admission plugin allows only to who may update the owner's finalizers.
// +kubebuilder:rbac:groups=kiln.dev,resources=crontrainjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;delete

// Reasons of the CronTrainJob controller's events and of its Ready condition.
const (
	ReasonInvalidSchedule   = "InvalidSchedule"
	ReasonScheduled         = "Scheduled"
	ReasonScheduleSuspended = "Suspended"
	ReasonSuccessfulCreate  = "SuccessfulCreate"
	ReasonFailedCreate      = "FailedCreate"
	ReasonJobAlreadyActive  = "JobAlreadyActive"
	ReasonSuccessfulDelete  = "SuccessfulDelete"
	ReasonMissedSchedules   = "MissedSchedules"
	ReasonTooManyMissed     = "TooManyMissedTimes"
	CronConditionReady      = "Ready"
)

// Actions of the CronTrainJob controller's events.
const (
	actionSchedule = "Schedule"
	actionSkip     = "Skip"
	actionCreate   = "Create"
	actionDelete   = "Delete"
)

// Reconciler creates a CronTrainJob's runs as they fall due, with the CronJob
// controller's semantics. It keeps no timers: each reconcile reads the time, creates what
// is due and asks to be called again at the next scheduled time, so a restart loses
// nothing; and each run's name is derived from its scheduled time, so a restart or a retry
// finds the run it created instead of creating another.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	clock    clock.PassiveClock
	// skipped and missed remember which due instant's skip and misses were counted in the
	// metrics: every reconcile until the run is created finds the same instant due again.
	skipped, missed dueSeen
}

// NewReconciler returns the reconciler; clk tells it the time.
func NewReconciler(c client.Client, rec events.EventRecorder, clk clock.PassiveClock) *Reconciler {
	return &Reconciler{client: c, recorder: rec, clock: clk}
}

// SetupWithManager watches CronTrainJobs and the TrainJobs they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("crontrainjob").
		For(&kiln.CronTrainJob{}).
		Owns(&trainer.TrainJob{}).
		WithOptions(opts).
		Complete(r)
}

// Reconcile fetches the CronTrainJob and hands it to reconcile.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cj := &kiln.CronTrainJob{}
	if err := r.client.Get(ctx, req.NamespacedName, cj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("cronTrainJob", klog.KObj(cj)))
	return r.reconcile(ctx, cj)
}

// reconcile reads the runs, trims the history (crontrainjob_history.go), works out what
// is due (crontrainjob_due.go), starts it as the concurrency policy allows
// (crontrainjob_concurrency.go), computes the whole status in memory, writes it once, and
// only then records the events it explains.
//
// A run is created before the status saying so is written: written first, a lost create
// would leave lastScheduleTime past a time that never ran. A lost status write is
// harmless instead: the next reconcile finds the run by its name.
func (r *Reconciler) reconcile(ctx context.Context, cj *kiln.CronTrainJob) (ctrl.Result, error) {
	now := r.clock.Now()
	runs, err := r.runs(ctx, cj)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the runs: %w", err)
	}
	st := cj.Status.DeepCopy()
	hist := sortRuns(runs, st)
	evs, err := r.trimHistory(ctx, cj, hist)
	if err != nil {
		r.record(cj, evs, false)
		return ctrl.Result{}, err
	}
	plan := planSchedule(cj, st, now)
	r.countMissed(client.ObjectKeyFromObject(cj), plan)
	evs = append(evs, plan.events...)
	active := hist.active
	if !plan.due.IsZero() {
		var started []cronEvent
		active, started, err = r.startDue(ctx, cj, st, runs, active, plan.due, now)
		evs = append(evs, started...)
		if err != nil {
			r.record(cj, evs, false)
			return ctrl.Result{}, err
		}
	}
	setActive(st, active)
	if err := r.writeStatus(ctx, cj, st); err != nil {
		r.record(cj, evs, false)
		return ctrl.Result{}, err
	}
	r.record(cj, evs, true)
	return ctrl.Result{RequeueAfter: plan.requeueAfter}, nil
}

func (r *Reconciler) forget(cj types.NamespacedName) {
	r.skipped.forget(cj)
	r.missed.forget(cj)
}

// writeStatus writes st as the CronTrainJob's status, once, unless it is unchanged.
func (r *Reconciler) writeStatus(ctx context.Context, cj *kiln.CronTrainJob, st *kiln.CronTrainJobStatus) error {
	// Conditions keep their transition time while their status stands, so an unchanged
	// status compares equal.
	if apiequality.Semantic.DeepEqual(&cj.Status, st) {
		return nil
	}
	cj.Status = *st
	if err := r.client.Status().Update(ctx, cj); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

// setActive lists the active runs in the status.
func setActive(st *kiln.CronTrainJobStatus, active []run) {
	st.Active = nil
	for _, rn := range active {
		st.Active = append(st.Active, corev1.ObjectReference{
			APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Namespace: rn.job.Namespace, Name: rn.job.Name, UID: rn.job.UID,
		})
	}
	st.ActiveCount = int32(len(st.Active))
}

// setReady sets the Ready condition, at now when it changes.
func setReady(cj *kiln.CronTrainJob, st *kiln.CronTrainJobStatus, status metav1.ConditionStatus, reason, msg string, now metav1.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: CronConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: cj.Generation, LastTransitionTime: now,
	})
}

// cronEvent is an event of a CronTrainJob, recorded once the status explaining it is stored.
type cronEvent struct {
	kind, reason, action, note string
	// related is the run the event is about, if any.
	related runtime.Object
	// ofWrite: the event reports a write to a run (made, or failed). A retry does not
	// repeat that write, so the event is recorded even when the status is not stored.
	ofWrite bool
}

// record records the events of a reconcile: all of them once its status is stored, else
// those reporting writes to runs (a retry computes the others again).
func (r *Reconciler) record(cj *kiln.CronTrainJob, evs []cronEvent, stored bool) {
	for _, e := range evs {
		if stored || e.ofWrite {
			r.recorder.Eventf(cj, e.related, e.kind, e.reason, e.action, "%s", e.note)
		}
	}
}
