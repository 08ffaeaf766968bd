// Package trainjob is the TrainJob controller: it renders each TrainJob into a JobSet,
// propagates suspension, enforces the job's deadline and TTL, and reports the JobSet's
// progress in the TrainJob's status. One policy per file; the operator README maps them.
package trainjob

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// FieldOwner is the server-side apply field manager of everything the controller writes.
const FieldOwner = "kiln-trainjob-controller"

// timerPriority is the work queue priority of a TrainJob whose deadline or TTL falls due:
// ahead of the reconciles that status churn queues (priority 0, lower for resyncs), so that
// under load a due action does not wait behind them. A TrainJob just created comes after
// them and before the churn (createPriority, new_jobs_first.go).
const timerPriority = 100

// killPriority is that of the reconcile that deletes the JobSet of a TrainJob whose deadline
// just fired: after the due ones, before the rest.
const killPriority = timerPriority - 1

// cacheRetry is how soon a reconcile that found the cache behind its own write tries again.
const cacheRetry = 100 * time.Millisecond

// The controller's permissions, generated into config/rbac (`make generate`): everything it
// reads and writes, nothing more. The integration suite runs it with exactly these.
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainingruntimes;clustertrainingruntimes,verbs=get;list;watch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;create;patch;update;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=deletecollection
// +kubebuilder:rbac:groups=scheduling.x-k8s.io;scheduling.volcano.sh,resources=podgroups,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;create;patch;update;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch

// Reconciler reconciles TrainJobs.
type Reconciler struct {
	client client.Client
	// live reads past the cache, for what the cache cannot have yet.
	live      client.Reader
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	applied   appliedJobSets
	expect    expectations
	batches   statusBatches
	snapshots snapshotSpecs
	// snapshotSweep is how often unreferenced shared snapshots are deleted (runtime_snapshot_gc.go).
	snapshotSweep time.Duration
	retries       applyRetries
	stopper       *jobSetStopper
	// statusServer is where trainers report progress (trainer_status.go); cas, the
	// namespaces holding its CA certificate.
	statusServer StatusServer
	cas          statusCAs
	// keepLogs marks the JobSets' pods so that the tails of their logs outlive them
	// (render.KeepAttemptLogs, package attemptlogs).
	keepLogs bool
}

// WithAttemptLogs marks the pods of the JobSets it creates from now on so that the
// attempt-logs controller keeps their logs when they are deleted.
func (r *Reconciler) WithAttemptLogs(keep bool) *Reconciler {
	r.keepLogs = keep
	return r
}

// NewReconciler returns a reconciler reading through the cached client c (and live
// for what the cache cannot have yet), and recording events with rec.
func NewReconciler(c client.Client, live client.Reader, rec events.EventRecorder, clk clock.PassiveClock) *Reconciler {
	return &Reconciler{client: c, live: live, recorder: rec, clock: clk, stopper: newJobSetStopper(c),
		snapshots: snapshotSpecs{check: make(chan struct{}, 1)}}
}

// Reconcile fetches the TrainJob and hands it to reconcile.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	tj := &trainer.TrainJob{}
	if err := r.client.Get(ctx, req.NamespacedName, tj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log := klog.FromContext(ctx).WithValues("trainJob", klog.KObj(tj))
	ctx = klog.NewContext(ctx, log)
	if !tj.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	switch managedBy := ptr.Deref(tj.Spec.ManagedBy, trainer.TrainJobControllerName); managedBy {
	case trainer.TrainJobControllerName:
		return r.reconcile(ctx, tj)
	case trainer.MultiKueueControllerName:
		return r.reconcileDispatched(ctx, tj)
	default:
		log.V(3).Info("Skipping TrainJob managed by another controller", "managedBy", managedBy)
		return reconcile.Result{}, nil
	}
}

// reconcile reads the TrainJob's JobSet, brings the JobSet in line with the job, computes
// the whole status in memory, writes it once, records the events it explains, and only
// then acts on what the lifecycle decided.
//
// jobSetCreatedFirst: a reconcile that creates the JobSet stops there. The JobSet's watch
// event queues the job again, behind the other new jobs (createPriority), and that
// reconcile writes the status (startTime, from the JobSet's creation or the resume, and
// the conditions) and sets the job's timers. Under a burst of submissions each worker
// then spends one write per new job instead of two, and the JobSets, what users wait
// for, are created first; the statuses follow at the default priority.
func (r *Reconciler) reconcile(ctx context.Context, tj *trainer.TrainJob) (reconcile.Result, error) {
	ctx, traced := withReconcileTrace(ctx)
	key := client.ObjectKeyFromObject(tj)
	js := &jobsetv1alpha2.JobSet{}
	if err := r.client.Get(ctx, key, js); apierrors.IsNotFound(err) {
		js = nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading JobSet: %w", err)
	}
	if r.expect.pending(key, tj.ResourceVersion, js, r.clock.Now()) {
		// The cache is behind this process's own write, typically by milliseconds. The write's
		// watch event requeues the job too, but at the default priority: this requeue keeps a
		// due deadline's follow-up (its JobSet deletion) ahead of status churn.
		klog.FromContext(ctx).V(4).Info("Cache behind the controller's own write; waiting for it")
		return reconcile.Result{RequeueAfter: cacheRetry, Priority: ptr.To(killPriority)}, nil
	}
	var evs []event
	var applyErr error
	if !trainer.Finished(&tj.Status) {
		evs, applyErr = r.reconcileJobSet(ctx, tj, js)
		if js == nil && applyErr == nil {
			// The JobSet was created just now: its status comes next (jobSetCreatedFirst).
			r.retries.notice(key, nil)
			state := jobState(tj, &tj.Status)
			recordTrace(ctx, traced, tj, state, state, evs, lifecycleActions{}, nil)
			return reconcile.Result{}, nil
		}
	}
	if js != nil && !metav1.IsControlledBy(js, tj) {
		// Another TrainJob's JobSet, typically that of a deleted TrainJob of the same name
		// that the garbage collector has not removed yet: nothing of it is this job's. Its
		// deletion requeues this job, which then creates its own.
		js = nil
	}
	st := observe(tj, js)
	evs = append(evs, runtimeAvailability(tj, st, applyErr)...)
	evs = append(evs, jobSetRejection(tj, st, applyErr)...)
	evs = append(evs, r.retries.notice(key, applyErr)...)
	policy, err := r.runPolicy(ctx, tj)
	if err != nil {
		return reconcile.Result{}, errors.Join(applyErr, err)
	}
	acts := applyLifecycle(tj, st, policy, r.clock.Now(), r.activeSince(ctx, tj, st, js))
	changed := transitions(tj, st)
	before := *tj.Status.DeepCopy()
	batched, err := r.writeStatus(ctx, tj, st)
	if errors.Is(err, errTrainJobGone) {
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, errors.Join(applyErr, err)
	}
	if batched == 0 {
		// A change held for its batch is not stored yet: its events come with its write.
		evs = append(evs, changed...)
	}
	evs = append(evs, acts.events...)
	r.record(tj, evs)
	observeJobSetError(applyErr)
	from, to := jobState(tj, &before), jobState(tj, &before)
	if batched == 0 {
		observeWrite(tj, &before, st, acts, r.clock.Now())
		to = jobState(tj, st)
	}
	res, err := r.act(ctx, tj, js, st, acts, applyErr)
	recordTrace(ctx, traced, tj, from, to, evs, acts, cmp.Or(err, applyErr))
	return afterBatch(res, err, batched)
}

// act carries out what the lifecycle decided, now that the status explaining it is stored.
func (r *Reconciler) act(ctx context.Context, tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet, st *trainer.TrainJobStatus, acts lifecycleActions, applyErr error) (reconcile.Result, error) {
	if acts.deleteJobSet {
		// The deadline fired and Failed is stored: the JobSet goes in the next reconcile, queued
		// behind the other deadlines falling due now, so that under load every due job is
		// marked failed first.
		return reconcile.Result{RequeueAfter: killDelay, Priority: ptr.To(killPriority)}, nil
	}
	// That reconcile hands the deletion to the stopper, which does it in the background, so
	// that no worker waits on deletions while other deadlines fall due. A later reconcile
	// that finds the JobSet still there (after a restart) asks again.
	r.deleteJobSetPastDeadline(ctx, tj, js, st)
	if acts.restartPods {
		if err := r.restartPods(ctx, js); err != nil {
			return reconcile.Result{}, err
		}
	}
	if acts.deleteTrainJob {
		deleted, err := r.deleteExpired(ctx, tj)
		if deleted {
			observeTTLDeletion(tj, acts, r.clock.Now())
			if acts.ttlExpired != nil {
				r.record(tj, []event{*acts.ttlExpired})
			}
		}
		return reconcile.Result{}, err
	}
	if applyErr == nil && acts.requeueAfter > 0 {
		return reconcile.Result{RequeueAfter: acts.requeueAfter, Priority: ptr.To(timerPriority)}, nil
	}
	if errors.Is(applyErr, errRuntimeNotFound) || errors.Is(applyErr, errJobSetRejected) {
		// The runtime watch requeues the job as soon as the runtime appears; a refused
		// JobSet failed the job, for good.
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, applyErr
}

func (r *Reconciler) forget(tj types.NamespacedName) {
	r.applied.forget(tj)
	r.expect.forget(tj)
	r.batches.forget(tj)
	r.snapshots.forget(tj)
	r.retries.forget(tj)
}

// indexRuntimeRef indexes TrainJobs by "<kind>/<name>" of their runtime.
const indexRuntimeRef = "spec.runtimeRef"

func runtimeRefKey(kind, name string) string { return kind + "/" + name }

// SetupWithManager registers the controller: TrainJobs, the JobSets they own, and the
// runtimes they wait for.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &trainer.TrainJob{}, indexRuntimeRef, func(o client.Object) []string {
		tj := o.(*trainer.TrainJob)
		return []string{runtimeRefKey(runtimeKind(tj), tj.Spec.RuntimeRef.Name)}
	}); err != nil {
		return fmt.Errorf("indexing TrainJobs by runtime: %w", err)
	}
	r.stopper.ctx = ctx
	if err := mgr.Add(manager.RunnableFunc(r.collectSnapshots)); err != nil {
		return fmt.Errorf("adding the runtime snapshots' collector: %w", err)
	}
	if err := registerStateCollector(mgr.GetCache(), mgr.Elected()); err != nil {
		return fmt.Errorf("registering the kiln_trainjobs metric: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("trainjob").
		For(&trainer.TrainJob{}, builder.WithPredicates(notProgressOnly{})).
		Watches(&trainer.TrainJob{}, timersFirst(r.clock)).
		Watches(&trainer.TrainJob{}, newJobsFirst()).
		Owns(&jobsetv1alpha2.JobSet{}).
		Watches(&trainer.ClusterTrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.jobsOfRuntime(trainer.ClusterTrainingRuntimeKind))).
		Watches(&trainer.TrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.jobsOfRuntime(trainer.TrainingRuntimeKind))).
		WithOptions(opts).
		Complete(r)
}

// notProgressOnly drops the updates of a TrainJob that change nothing but its
// status.trainerStatus after its first report: a thousand trainers reporting every second
// would otherwise each be reconciled every second, and the deadlines and restarts of every
// job would queue behind them (docs/performance.md, "Deadlines falling due together"). The
// first report passes: it starts the progress deadline's clock, which then wakes the job
// itself when it falls due.
type notProgressOnly struct {
	predicate.Funcs
}

func (notProgressOnly) Update(e ctrlevent.UpdateEvent) bool {
	old, ok1 := e.ObjectOld.(*trainer.TrainJob)
	cur, ok2 := e.ObjectNew.(*trainer.TrainJob)
	// A resync (same version) passes too.
	if !ok1 || !ok2 || old.Status.TrainerStatus == nil || cur.Status.TrainerStatus == nil || old.ResourceVersion == cur.ResourceVersion {
		return true
	}
	if old.Generation != cur.Generation || !equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.Annotations, cur.Annotations) || !equality.Semantic.DeepEqual(old.Finalizers, cur.Finalizers) ||
		!equality.Semantic.DeepEqual(old.OwnerReferences, cur.OwnerReferences) || !old.DeletionTimestamp.Equal(cur.DeletionTimestamp) {
		return true
	}
	a, b := old.Status, cur.Status
	a.TrainerStatus, b.TrainerStatus = nil, nil
	return !equality.Semantic.DeepEqual(a, b)
}

// jobsOfRuntime requeues the unfinished TrainJobs that reference a runtime, so a job whose
// runtime was missing starts as soon as it is created.
func (r *Reconciler) jobsOfRuntime(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &trainer.TrainJobList{}
		opts := []client.ListOption{client.MatchingFields{indexRuntimeRef: runtimeRefKey(kind, o.GetName())}}
		if kind == trainer.TrainingRuntimeKind {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		if err := r.client.List(ctx, list, opts...); err != nil {
			klog.FromContext(ctx).Error(err, "Listing TrainJobs of a runtime", "runtime", o.GetName())
			return nil
		}
		var reqs []reconcile.Request
		for _, tj := range list.Items {
			if !trainer.Finished(&tj.Status) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}})
			}
		}
		return reqs
	}
}
