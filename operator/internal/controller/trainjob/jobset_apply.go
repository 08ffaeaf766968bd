package trainjob

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/render"
)

// reconcileJobSet creates the JobSet, or updates it while the TrainJob or the JobSet is
// suspended (the only time a JobSet's pod templates may change): that is how suspension,
// resumption and Kueue's runtime patches reach it. A running JobSet is left alone.
func (r *Reconciler) reconcileJobSet(ctx context.Context, tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet) ([]event, error) {
	if js != nil && !metav1.IsControlledBy(js, tj) {
		return nil, reconcile.TerminalError(fmt.Errorf("JobSet %s exists and is not owned by this TrainJob: delete it or rename the TrainJob", js.Name))
	}
	if js != nil && !ptr.Deref(tj.Spec.Suspend, false) && !ptr.Deref(js.Spec.Suspend, false) {
		return nil, nil
	}
	// Both suspended: no pod runs from the JobSet's templates, so what changed meanwhile
	// (Kueue's runtime patches at admission, a user's edits while queued) reaches the
	// JobSet in the one update that resumes it, as Kueue's own JobSet integration does:
	// a write less per admitted job.
	if js != nil && ptr.Deref(tj.Spec.Suspend, false) && ptr.Deref(js.Spec.Suspend, false) {
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
		return []event{{corev1.EventTypeWarning, ReasonRenderFailed, err.Error()}}, reconcile.TerminalError(fmt.Errorf("%w: %w", errRender, err))
	}
	render.InjectStatusServer(res.JobSet, tj, r.statusServer.StatusServer)
	if r.keepLogs {
		render.KeepAttemptLogs(res.JobSet)
	}
	key := client.ObjectKeyFromObject(tj)
	hash, err := renderingHash(res)
	if err != nil {
		return nil, err
	}
	if js != nil && r.applied.unchanged(key, js.UID, js.Generation, hash) {
		return nil, nil
	}
	if js == nil {
		if err := r.ensureStatusServerCA(ctx, tj.Namespace); err != nil {
			return nil, fmt.Errorf("%w: %w", errApplyRetried, err)
		}
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
	if res.PodGroup != nil {
		if evs, err := r.applyPodGroup(ctx, res.PodGroup); err != nil {
			return evs, err
		}
	}
	step := "update JobSet"
	if js == nil {
		step = "create JobSet"
	}
	applyStart := time.Now()
	applied, err := r.apply(ctx, res.JobSet)
	traceStep(ctx, step, applyStart, err)
	if rejectedForGood(err) {
		return nil, fmt.Errorf("%w: %w", errJobSetRejected, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errApplyRetried, err)
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

// applyPodGroup writes the gang of the runtime's podGroupPolicy before the JobSet whose pods
// name it: a coscheduling scheduler refuses a pod whose PodGroup does not exist. Like
// upstream, it is written whenever the JobSet is (created, or updated while suspended), and
// not while the job runs. A cluster that serves no PodGroup kind holds the job (its pods
// would not be gang-scheduled, or not scheduled at all) and says so.
func (r *Reconciler) applyPodGroup(ctx context.Context, pg client.Object) ([]event, error) {
	_, err := r.apply(ctx, pg)
	if err == nil {
		return nil, nil
	}
	gvk := pg.GetObjectKind().GroupVersionKind()
	if meta.IsNoMatchError(err) {
		msg := fmt.Sprintf("the runtime asks for gang scheduling (podGroupPolicy.%s) but the cluster serves no %s: "+
			"install its CRD and its scheduler, or remove podGroupPolicy from the runtime; the JobSet is created once %s is served",
			podGroupPolicyName(gvk.Group), gvk.GroupKind(), gvk.GroupKind())
		return []event{{corev1.EventTypeWarning, ReasonPodGroupUnavailable, msg}}, fmt.Errorf("%w: %s", errApplyRetried, msg)
	}
	return nil, fmt.Errorf("%w: applying %s %s: %w", errApplyRetried, gvk.GroupKind(), pg.GetName(), err)
}

// podGroupPolicyName is the podGroupPolicy field whose PodGroups are in group.
func podGroupPolicyName(group string) string {
	if group == "scheduling.volcano.sh" {
		return "volcano"
	}
	return "coscheduling"
}

// errRender: the TrainJob and its runtime do not make a JobSet; a retry cannot fix that.
var errRender = errors.New("rendering the JobSet")

// errJobSetRejected: the apiserver refused the rendered JobSet in a way no retry can fix.
var errJobSetRejected = errors.New("the JobSet was refused")

// errApplyRetried: writing the JobSet failed in a way a retry may fix (the apiserver busy,
// a quota exceeded for now); the reconcile is retried with backoff.
var errApplyRetried = errors.New("creating or updating the JobSet failed")

// retryNoticeAfter is how many consecutive failed writes of a job's JobSet make a Warning
// event (then again at every doubling): retries are silent, a job stuck on them is not.
const retryNoticeAfter = 8

// applyRetries counts, per TrainJob, the consecutive failed writes of its JobSet. Like
// expectations, it is only for telling: a restart starts counting again.
type applyRetries struct {
	mu sync.Mutex
	m  map[types.NamespacedName]int
}

// notice counts a reconcile's outcome and returns the event it deserves, if any.
func (a *applyRetries) notice(tj types.NamespacedName, applyErr error) []event {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !errors.Is(applyErr, errApplyRetried) {
		delete(a.m, tj)
		return nil
	}
	if a.m == nil {
		a.m = map[types.NamespacedName]int{}
	}
	a.m[tj]++
	n := a.m[tj]
	if n < retryNoticeAfter || n&(n-1) != 0 {
		return nil
	}
	return []event{{corev1.EventTypeWarning, ReasonJobSetRetrying, fmt.Sprintf("%d attempts in a row failed, retrying with backoff: %v", n, applyErr)}}
}

func (a *applyRetries) forget(tj types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, tj)
}

// rejectedForGood says whether an apply error is the apiserver's final word on the JobSet:
// invalid, or denied by an admission webhook (JobSet's answers Forbidden). A quota that is
// exceeded now may not be later.
func rejectedForGood(err error) bool {
	if apierrors.IsInvalid(err) {
		return true
	}
	return apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "exceeded quota")
}

// jobSetRejection fails a TrainJob whose JobSet the apiserver refused for good, with its
// message, so that the job does not sit admitted (holding Kueue's quota) with nothing running.
func jobSetRejection(tj *trainer.TrainJob, st *trainer.TrainJobStatus, applyErr error) []event {
	if !errors.Is(applyErr, errJobSetRejected) || trainer.Finished(st) {
		return nil
	}
	msg := fmt.Sprintf("%v; this TrainJob can never run as written: fix it (or its runtime) and create it again", applyErr)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: trainer.TrainJobJobSetRejectedReason,
		Message: msg, ObservedGeneration: tj.Generation,
	})
	orderConditions(st.Conditions)
	return []event{{corev1.EventTypeWarning, trainer.TrainJobJobSetRejectedReason, msg}}
}

func (r *Reconciler) ensureSSHSecret(ctx context.Context, tj *trainer.TrainJob) error {
	err := r.client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: render.SSHSecretName(tj)}, &corev1.Secret{})
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
func (r *Reconciler) apply(ctx context.Context, obj runtime.Object) (metav1.Object, error) {
	u, err := toApplyConfiguration(obj)
	if err != nil {
		return nil, err
	}
	if err := r.client.Apply(ctx, u.ApplyConfiguration, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return nil, err
	}
	return u.Unstructured, nil
}

// toApplyConfiguration turns a typed object into an apply request: no status, no server
// fields, no nulls (a null would claim a field without setting it).
func toApplyConfiguration(obj runtime.Object) (*unstructuredApply, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	u := &unstructured.Unstructured{Object: pruneNulls(m).(map[string]any)}
	return &unstructuredApply{Unstructured: u, ApplyConfiguration: client.ApplyConfigurationFromUnstructured(u)}, nil
}

// unstructuredApply is an apply configuration whose Unstructured receives the applied
// object (controller-runtime decodes the response into it).
type unstructuredApply struct {
	*unstructured.Unstructured
	runtime.ApplyConfiguration
}

func pruneNulls(v any) any {
	switch o := v.(type) {
	case map[string]any:
		for k, val := range o {
			if val == nil {
				delete(o, k)
				continue
			}
			o[k] = pruneNulls(val)
		}
	case []any:
		for i := range o {
			o[i] = pruneNulls(o[i])
		}
	}
	return v
}

// appliedJobSets remembers, per TrainJob, what this process last applied to its JobSet
// and the JobSet generation that write produced. A suspended TrainJob is reconciled on
// every status change of its JobSet; re-applying an unchanged rendering would cost an
// apiserver write and two admission webhook calls each time. The memory is only an
// optimisation: after a restart, or when anyone else changed the JobSet's spec (its
// generation moved), the JobSet is applied again.
type appliedJobSets struct {
	mu sync.Mutex
	m  map[types.NamespacedName]appliedJobSet
}

type appliedJobSet struct {
	uid        types.UID
	generation int64
	rendering  [sha256.Size]byte
}

// renderingHash identifies everything reconcileJobSet writes for a rendering.
func renderingHash(res *render.Result) ([sha256.Size]byte, error) {
	data, err := json.Marshal(struct {
		JobSet, Hostfile, PodGroup any
		SSH                        bool
	}{res.JobSet, res.HostfileConfigMap, res.PodGroup, res.NeedsSSHSecret})
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("hashing the rendered JobSet: %w", err)
	}
	return sha256.Sum256(data), nil
}

// unchanged says that the JobSet (uid, generation) is what this process applied for
// the same rendering.
func (a *appliedJobSets) unchanged(tj types.NamespacedName, uid types.UID, generation int64, rendering [sha256.Size]byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	rec, ok := a.m[tj]
	return ok && rec.uid == uid && rec.generation == generation && rec.rendering == rendering
}

func (a *appliedJobSets) record(tj types.NamespacedName, rec appliedJobSet) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[types.NamespacedName]appliedJobSet{}
	}
	a.m[tj] = rec
}

func (a *appliedJobSets) forget(tj types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, tj)
}
