// Package controller holds the TrainJob controller: it renders each TrainJob into a JobSet,
// propagates suspension, and reports the JobSet's progress in the TrainJob's status.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/render"
)

// FieldOwner is the server-side apply field manager of everything the controller writes.
const FieldOwner = "kiln-trainjob-controller"

// Event reasons.
const (
	ReasonCreated         = "Created"
	ReasonSuspended       = "Suspended"
	ReasonResumed         = "Resumed"
	ReasonCompleted       = "Completed"
	ReasonFailed          = "Failed"
	ReasonRuntimeNotFound = "RuntimeNotFound"
	ReasonRenderFailed    = "RenderFailed"
	ReasonTTLExpired      = "TTLExpired"
)

// timerPriority is the work queue priority of a TrainJob whose deadline or TTL falls due:
// ahead of the reconciles that status churn queues (priority 0, lower for resyncs), so that
// under load a due action does not wait behind them.
const timerPriority = 100

// killPriority is that of the reconcile that deletes the JobSet of a TrainJob whose deadline
// just fired: after the due ones, before the rest.
const killPriority = timerPriority - 1

// cacheRetry is how soon a reconcile that found the cache behind its own write tries again.
const cacheRetry = 100 * time.Millisecond

// TrainJobReconciler reconciles TrainJobs.
type TrainJobReconciler struct {
	client ctrl.Client
	// live reads past the cache, for what the cache cannot have yet.
	live      ctrl.Reader
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	applied   appliedJobSets
	expect    expectations
	mirrors   mirrorBatches
	snapshots snapshotSpecs
}

// NewTrainJobReconciler returns a reconciler reading through the cached client c (and live
// for what the cache cannot have yet), and recording events with rec.
func NewTrainJobReconciler(c ctrl.Client, live ctrl.Reader, rec events.EventRecorder, clk clock.PassiveClock) *TrainJobReconciler {
	return &TrainJobReconciler{client: c, live: live, recorder: rec, clock: clk}
}

// event is recorded once the status write that it describes succeeded.
type event struct {
	kind, reason, note string
}

// Reconcile fetches the TrainJob and hands it to reconcile.
func (r *TrainJobReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	tj := &trainer.TrainJob{}
	if err := r.client.Get(ctx, req.NamespacedName, tj); err != nil {
		if apierrors.IsNotFound(err) {
			r.applied.forget(req.NamespacedName)
			r.expect.forget(req.NamespacedName)
			r.mirrors.forget(req.NamespacedName)
			r.snapshots.forget(req.NamespacedName)
		}
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	log := klog.FromContext(ctx).WithValues("trainJob", klog.KObj(tj))
	ctx = klog.NewContext(ctx, log)
	if ptr.Deref(tj.Spec.ManagedBy, trainer.TrainJobControllerName) != trainer.TrainJobControllerName {
		log.V(3).Info("Skipping TrainJob managed by another controller", "managedBy", *tj.Spec.ManagedBy)
		return reconcile.Result{}, nil
	}
	if !tj.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	return r.reconcile(ctx, tj)
}

func (r *TrainJobReconciler) reconcile(ctx context.Context, tj *trainer.TrainJob) (res reconcile.Result, err error) {
	// How long a status change left for a later write (one that only mirrors) may wait:
	// the job is reconciled again, and the change written, when its batch ends. At the
	// default priority, not a timer's: batches must not hold up the deadlines and TTLs that
	// fall due meanwhile, and that reconcile sets the job's timer again.
	var batched time.Duration
	defer func() {
		if err == nil && batched > 0 && !res.Requeue && (res.RequeueAfter == 0 || batched < res.RequeueAfter) {
			res.RequeueAfter, res.Priority = batched, nil
		}
	}()
	js := &jobsetv1alpha2.JobSet{}
	if err := r.client.Get(ctx, ctrl.ObjectKeyFromObject(tj), js); apierrors.IsNotFound(err) {
		js = nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading JobSet: %w", err)
	}
	if r.expect.pending(ctrl.ObjectKeyFromObject(tj), tj.ResourceVersion, js, r.clock.Now()) {
		// The cache is behind this process's own write, typically by milliseconds. The write's
		// watch event requeues the job too, but at the default priority: this requeue keeps a
		// due deadline's follow-up (its JobSet deletion) ahead of status churn.
		klog.FromContext(ctx).V(4).Info("Cache behind the controller's own write; waiting for it")
		return reconcile.Result{RequeueAfter: cacheRetry, Priority: ptr.To(killPriority)}, nil
	}
	var evs []event
	var applyErr error
	if !finished(&tj.Status) {
		evs, applyErr = r.reconcileJobSet(ctx, tj, js)
	}
	if js != nil && !metav1.IsControlledBy(js, tj) {
		// Another TrainJob's JobSet, typically that of a deleted TrainJob of the same name
		// that the garbage collector has not removed yet: nothing of it is this job's. Its
		// deletion requeues this job, which then creates its own.
		js = nil
	}
	st := observe(tj, js)
	if errors.Is(applyErr, errRuntimeNotFound) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: trainer.TrainJobRuntimeNotFoundReason, ObservedGeneration: tj.Generation,
			Message: fmt.Sprintf("%s %q not found: create it, or point spec.runtimeRef at an existing runtime", runtimeKind(tj), tj.Spec.RuntimeRef.Name),
		})
		evs = append(evs, event{corev1.EventTypeWarning, ReasonRuntimeNotFound, meta.FindStatusCondition(st.Conditions, trainer.TrainJobFailed).Message})
	} else if c := meta.FindStatusCondition(st.Conditions, trainer.TrainJobFailed); c != nil && c.Reason == trainer.TrainJobRuntimeNotFoundReason && applyErr == nil {
		// The runtime appeared: the failure is over (False, not removed, so that the
		// transition stays visible and the status is never empty).
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: trainer.TrainJobFailed, Status: metav1.ConditionFalse, Reason: trainer.TrainJobRuntimeFoundReason, ObservedGeneration: tj.Generation,
			Message: fmt.Sprintf("%s %q found", runtimeKind(tj), tj.Spec.RuntimeRef.Name),
		})
	}
	policy, err := r.runPolicy(ctx, tj)
	if err != nil {
		return reconcile.Result{}, errors.Join(applyErr, err)
	}
	var activeSince *time.Time
	if st.StartTime == nil && !ptr.Deref(tj.Spec.Suspend, false) && !finished(st) {
		// Kueue's admission is exact; a plain resume is read from who wrote spec.suspend.
		if activeSince = r.admissionTime(ctx, tj); activeSince == nil {
			activeSince = unsuspendedAt(tj, r.clock.Now())
		}
	}
	acts := applyLifecycle(tj, st, policy, r.clock.Now(), activeSince)
	evs = append(evs, transitions(&tj.Status, st)...)
	evs = append(evs, acts.events...)
	if apiequality.Semantic.DeepEqual(&tj.Status, st) {
		r.mirrors.forget(ctrl.ObjectKeyFromObject(tj))
	} else if batched = r.mirrors.wait(ctrl.ObjectKeyFromObject(tj), mirrorOnly(&tj.Status, st), r.clock.Now()); batched == 0 {
		// A merge patch of what changed, at no particular version: the status is this
		// controller's alone, and a write of someone else's (Kueue's spec.suspend, say) in
		// between is no reason to refuse it. That write's own event reconciles the job again.
		read := tj.DeepCopy()
		tj.Status = *st
		if err := r.client.Status().Patch(ctx, tj, ctrl.MergeFrom(read)); apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil // deleted meanwhile: nothing left to write
		} else if err != nil {
			return reconcile.Result{}, errors.Join(applyErr, fmt.Errorf("writing status: %w", err))
		}
		r.expect.statusWritten(ctrl.ObjectKeyFromObject(tj), read.ResourceVersion, tj.ResourceVersion, r.clock.Now())
	}
	for _, e := range evs {
		r.recorder.Eventf(tj, nil, e.kind, e.reason, "Reconcile", "%s", e.note)
	}
	if acts.deleteJobSet {
		// The deadline fired and Failed is stored: the JobSet goes in the next reconcile, queued
		// behind the other deadlines falling due now, so that under load every due job is
		// marked failed first and none waits behind another's deletions.
		return reconcile.Result{Requeue: true, Priority: ptr.To(killPriority)}, nil
	}
	// Only now that Failed/DeadlineExceeded is stored: a TrainJob whose JobSet is gone but
	// that is not yet known to have failed would otherwise create it again.
	if c := meta.FindStatusCondition(st.Conditions, trainer.TrainJobFailed); js != nil && js.DeletionTimestamp.IsZero() &&
		c != nil && c.Status == metav1.ConditionTrue && c.Reason == trainer.TrainJobDeadlineExceededReason {
		if err := r.client.Delete(ctx, js, ctrl.PropagationPolicy(metav1.DeletePropagationBackground)); ctrl.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting the JobSet of a TrainJob past its deadline: %w", err)
		}
		// Its Jobs go too, now: the garbage collector would get to them only once it watches
		// JobSets, which can take a while after JobSet is installed. The JobSet is already
		// gone, so nothing recreates them; their pods get their grace period.
		if err := r.client.DeleteAllOf(ctx, &batchv1.Job{}, ctrl.InNamespace(tj.Namespace),
			ctrl.MatchingLabels{jobsetv1alpha2.JobSetNameKey: js.Name}, ctrl.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			return reconcile.Result{}, fmt.Errorf("deleting the Jobs of a TrainJob past its deadline: %w", err)
		}
	}
	if acts.deleteTrainJob {
		// Its JobSet, pods, services, config maps and secrets go with it (owner references).
		if err := r.client.Delete(ctx, tj, ctrl.PropagationPolicy(metav1.DeletePropagationBackground)); ctrl.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting the TrainJob after its TTL: %w", err)
		}
		return reconcile.Result{}, nil
	}
	if applyErr == nil && acts.requeueAfter > 0 {
		return reconcile.Result{RequeueAfter: acts.requeueAfter, Priority: ptr.To(timerPriority)}, nil
	}
	if errors.Is(applyErr, errRuntimeNotFound) {
		// The runtime watch requeues the job as soon as the runtime appears.
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, applyErr
}

// transitions are the events a status change deserves.
func transitions(before, after *trainer.TrainJobStatus) []event {
	var evs []event
	turned := func(t string, s metav1.ConditionStatus, reason string) *metav1.Condition {
		a := meta.FindStatusCondition(after.Conditions, t)
		if a == nil || a.Status != s || (reason != "" && a.Reason != reason) {
			return nil
		}
		b := meta.FindStatusCondition(before.Conditions, t)
		if b != nil && b.Status == a.Status && b.Reason == a.Reason {
			return nil
		}
		return a
	}
	if c := turned(trainer.TrainJobSuspended, metav1.ConditionTrue, ""); c != nil {
		evs = append(evs, event{corev1.EventTypeNormal, ReasonSuspended, c.Message})
	}
	if c := turned(trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason); c != nil {
		evs = append(evs, event{corev1.EventTypeNormal, ReasonResumed, c.Message})
	}
	if c := turned(trainer.TrainJobComplete, metav1.ConditionTrue, ""); c != nil {
		evs = append(evs, event{corev1.EventTypeNormal, ReasonCompleted, "TrainJob completed: " + c.Message})
	}
	if c := turned(trainer.TrainJobFailed, metav1.ConditionTrue, ""); c != nil && c.Reason != trainer.TrainJobRuntimeNotFoundReason && c.Reason != trainer.TrainJobDeadlineExceededReason {
		evs = append(evs, event{corev1.EventTypeWarning, ReasonFailed, "TrainJob failed: " + c.Message})
	}
	return evs
}

// reconcileJobSet creates the JobSet, or updates it while the TrainJob or the JobSet is
// suspended (the only time a JobSet's pod templates may change): that is how suspension,
// resumption and Kueue's runtime patches reach it. A running JobSet is left alone.
func (r *TrainJobReconciler) reconcileJobSet(ctx context.Context, tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet) ([]event, error) {
	if js != nil && !metav1.IsControlledBy(js, tj) {
		return nil, reconcile.TerminalError(fmt.Errorf("JobSet %s exists and is not owned by this TrainJob: delete it or rename the TrainJob", js.Name))
	}
	if js != nil && !ptr.Deref(tj.Spec.Suspend, false) && !ptr.Deref(js.Spec.Suspend, false) {
		return nil, nil
	}
	rt, err := r.pinnedRuntime(ctx, tj)
	if errors.Is(err, errForeignSnapshot) {
		return []event{{corev1.EventTypeWarning, ReasonRenderFailed, err.Error()}}, err
	}
	if err != nil {
		return nil, err
	}
	res, err := render.Render(tj, rt)
	if err != nil {
		return []event{{corev1.EventTypeWarning, ReasonRenderFailed, err.Error()}}, reconcile.TerminalError(err)
	}
	key := ctrl.ObjectKeyFromObject(tj)
	hash, err := renderingHash(res)
	if err != nil {
		return nil, err
	}
	if js != nil && r.applied.unchanged(key, js.UID, js.Generation, hash) {
		return nil, nil
	}
	if res.NeedsSSHSecret {
		if err := r.ensureSSHSecret(ctx, tj); err != nil {
			return nil, err
		}
	}
	if res.HostfileConfigMap != nil {
		if _, err := r.apply(ctx, res.HostfileConfigMap); err != nil {
			return nil, fmt.Errorf("applying MPI hostfile: %w", err)
		}
	}
	applied, err := r.apply(ctx, res.JobSet)
	if err != nil {
		return nil, fmt.Errorf("applying JobSet: %w", err)
	}
	r.applied.record(key, appliedJobSet{uid: applied.GetUID(), generation: applied.GetGeneration(), rendering: hash})
	if js == nil {
		r.expect.jobSetCreated(key, applied.GetUID(), r.clock.Now())
		// Recorded now: the write it describes succeeded, whatever happens to the status write.
		klog.FromContext(ctx).V(2).Info("Created JobSet", "jobSet", klog.KObj(res.JobSet))
		r.recorder.Eventf(tj, res.JobSet, corev1.EventTypeNormal, ReasonCreated, "Reconcile", "Created JobSet %s", res.JobSet.Name)
	}
	return nil, nil
}

func (r *TrainJobReconciler) ensureSSHSecret(ctx context.Context, tj *trainer.TrainJob) error {
	err := r.client.Get(ctx, ctrl.ObjectKey{Namespace: tj.Namespace, Name: render.SSHSecretName(tj)}, &corev1.Secret{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	secret, err := render.NewSSHSecret(tj)
	if err != nil {
		return err
	}
	if err := r.client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating MPI SSH secret: %w", err)
	}
	return nil
}

// apply server-side applies obj with the controller's field owner and returns what the
// apiserver stored.
func (r *TrainJobReconciler) apply(ctx context.Context, obj runtime.Object) (metav1.Object, error) {
	u, err := toApplyConfiguration(obj)
	if err != nil {
		return nil, err
	}
	if err := r.client.Apply(ctx, u.ApplyConfiguration, ctrl.FieldOwner(FieldOwner), ctrl.ForceOwnership); err != nil {
		return nil, err
	}
	return u.Unstructured, nil
}

// runPolicy is the TrainJob's deadline and TTL: its own, else its pinned runtime's.
func (r *TrainJobReconciler) runPolicy(ctx context.Context, tj *trainer.TrainJob) (trainer.EffectiveRunPolicy, error) {
	policy := trainer.ResolveRunPolicy(&tj.Spec, nil)
	if policy.ActiveDeadlineSeconds != nil && policy.TTLSecondsAfterFinished != nil {
		return policy, nil
	}
	rt, err := r.pinnedRuntime(ctx, tj)
	if errors.Is(err, errRuntimeNotFound) || errors.Is(err, errForeignSnapshot) {
		// Nothing runs without a runtime; the render reports why.
		return policy, nil
	}
	if err != nil {
		return policy, err
	}
	return trainer.ResolveRunPolicy(&tj.Spec, rt.RunPolicy), nil
}
