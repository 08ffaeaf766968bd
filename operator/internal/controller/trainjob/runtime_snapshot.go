package trainjob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/render"
)

// errRuntimeNotFound means the referenced runtime does not exist (yet).
var errRuntimeNotFound = errors.New("runtime not found")

func snapshotName(tj *trainer.TrainJob) string { return trainer.RuntimeSnapshotName(tj.Name) }

func runtimeKind(tj *trainer.TrainJob) string {
	return ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)
}

// pinnedRuntime returns the runtime spec the TrainJob renders from, pinned so that editing the
// runtime later never changes this job. A job stamped with the hash of its runtime at
// admission (trainer.AnnotationRuntimeSnapshot) renders from the shared snapshot of that hash
// in its namespace, stored by the first job that needs it; a job not stamped, or whose
// runtime changed between its admission and its first reconcile, is pinned to the runtime as
// it is at its first reconcile, in a ConfigMap of its own owned by the job.
//
// The snapshots are not cached: the process keeps each job's decoded snapshot from its
// create on (snapshotSpecs), and after a restart lists them all once (snapshotSpecs.load).
// An informer of every snapshot ConfigMap cost memory per job to serve reads that only a
// restart needs (docs/performance.md, "No ConfigMap informer").
func (r *Reconciler) pinnedRuntime(ctx context.Context, tj *trainer.TrainJob) (*trainer.TrainingRuntimeSpec, error) {
	if spec, ok := r.snapshots.get(tj); ok {
		return spec, nil
	}
	if err := r.snapshots.load(ctx, r.live); err != nil {
		return nil, fmt.Errorf("listing the runtime snapshots: %w", err)
	}
	if spec, ok := r.snapshots.get(tj); ok {
		return spec, nil
	}
	var snap *trainer.RuntimeSnapshot
	if hash := tj.Annotations[trainer.AnnotationRuntimeSnapshot]; hash != "" {
		spec, live, err := r.pinShared(ctx, tj, hash)
		if spec != nil || err != nil {
			return spec, err
		}
		snap = live
	}
	if snap == nil {
		var err error
		if snap, err = r.readRuntime(ctx, tj); err != nil {
			return nil, err
		}
	}
	data, _, err := trainer.EncodeRuntimeSnapshot(snap)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            snapshotName(tj),
			Namespace:       tj.Namespace,
			Labels:          map[string]string{trainer.LabelRuntimeSnapshot: trainer.OwnSnapshot},
			OwnerReferences: []metav1.OwnerReference{render.OwnerReference(tj)},
		},
		Data: map[string]string{trainer.RuntimeSnapshotKey: data},
	}
	err = r.client.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		// Pinned already, but not in the list this process loaded: by the previous leader
		// during a handover, by a Kiln that did not label its snapshots, or it is someone
		// else's ConfigMap (decode says so).
		if err := r.live.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return nil, fmt.Errorf("reading runtime snapshot: %w", err)
		}
		return r.snapshots.decode(tj, cm)
	}
	if err != nil {
		return nil, fmt.Errorf("storing runtime snapshot: %w", err)
	}
	return r.snapshots.decode(tj, cm)
}

// pinShared pins a stamped TrainJob to the shared snapshot of its hash: the one this process
// knows, else the runtime as it is now when its hash is still the stamp's, stored as that
// snapshot. When the runtime changed since the job's admission it returns no spec and the
// runtime as it is now, for a snapshot of the job's own. It holds that snapshot's lock, which the
// collector takes too, so that it is not deleted between being found unreferenced and a job
// pinning it; jobs of other runtime versions or namespaces do not wait for it.
func (r *Reconciler) pinShared(ctx context.Context, tj *trainer.TrainJob, hash string) (*trainer.TrainingRuntimeSpec, *trainer.RuntimeSnapshot, error) {
	defer r.snapshots.sharedLocks.lock(sharedSnapshot{tj.Namespace, hash})()
	if spec, ok := r.snapshots.pinShared(tj, hash); ok {
		return spec, nil, nil
	}
	snap, err := r.readRuntime(ctx, tj)
	if err != nil {
		return nil, nil, err
	}
	data, got, err := trainer.EncodeRuntimeSnapshot(snap)
	if err != nil {
		return nil, nil, err
	}
	if got != hash {
		return nil, snap, nil
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      trainer.SharedRuntimeSnapshotName(hash),
			Namespace: tj.Namespace,
			Labels:    map[string]string{trainer.LabelRuntimeSnapshot: trainer.SharedSnapshot},
		},
		Data: map[string]string{trainer.RuntimeSnapshotKey: data},
	}
	err = r.client.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		// Stored since this process listed them (another leader's), or someone else's.
		if err := r.live.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return nil, nil, fmt.Errorf("reading runtime snapshot: %w", err)
		}
		if !trainer.IsSharedRuntimeSnapshot(cm, hash) {
			return nil, nil, fmt.Errorf("%w: ConfigMap %s is in the way of the snapshot of runtime %s (Kiln's is labelled %s=%s and holds the runtime whose hash ends its name): delete or rename it",
				errForeignSnapshot, cm.Name, snap.Name, trainer.LabelRuntimeSnapshot, trainer.SharedSnapshot)
		}
	} else if err != nil {
		return nil, nil, fmt.Errorf("storing runtime snapshot: %w", err)
	}
	spec, err := r.snapshots.keepShared(tj.Namespace, hash, cm)
	if err != nil {
		return nil, nil, err
	}
	r.snapshots.pinTo(tj, spec, hash)
	return spec.DeepCopy(), nil, nil
}

// readRuntime reads the TrainJob's runtime as it is now, as a snapshot.
func (r *Reconciler) readRuntime(ctx context.Context, tj *trainer.TrainJob) (*trainer.RuntimeSnapshot, error) {
	var err error
	snap := &trainer.RuntimeSnapshot{Kind: runtimeKind(tj), Name: tj.Spec.RuntimeRef.Name}
	switch snap.Kind {
	case trainer.TrainingRuntimeKind:
		rt := &trainer.TrainingRuntime{}
		err = r.client.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: snap.Name}, rt)
		snap.Spec = rt.Spec
	case trainer.ClusterTrainingRuntimeKind:
		rt := &trainer.ClusterTrainingRuntime{}
		err = r.client.Get(ctx, client.ObjectKey{Name: snap.Name}, rt)
		snap.Spec = rt.Spec
	default:
		return nil, fmt.Errorf("spec.runtimeRef.kind %q is not supported: use TrainingRuntime or ClusterTrainingRuntime", snap.Kind)
	}
	if apierrors.IsNotFound(err) {
		return nil, errRuntimeNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", snap.Kind, snap.Name, err)
	}
	return snap, nil
}

// errForeignSnapshot: the ConfigMap under the name of the TrainJob's runtime snapshot is
// someone else's. Nothing is rendered until it is gone.
var errForeignSnapshot = errors.New("runtime snapshot conflict")

// snapshotSpecs holds the decoded runtime snapshot of every TrainJob this process pinned or
// read, one copy for all the jobs whose snapshots are equal (typically thousands of jobs of a
// few runtimes): a reconcile neither reads nor decodes the ConfigMap again.
type snapshotSpecs struct {
	mu     sync.Mutex
	byJob  map[types.NamespacedName]pinnedSpec
	byData map[string]*trainer.TrainingRuntimeSpec
	// shared are the shared snapshots this process stored or read, by namespace and hash.
	shared map[sharedSnapshot]*trainer.TrainingRuntimeSpec
	// sharedLocks has a lock per shared snapshot, held while a job is pinned to it and while
	// the collector finds it unreferenced and deletes it.
	sharedLocks keyLocks
	// unpinned are the shared snapshots deleted jobs were pinned to, which the collector
	// checks (told on check, buffered: one wake for many).
	unpinned map[sharedSnapshot]bool
	check    chan struct{}

	// loadMu is held while the snapshots are listed (load), loaded once they were.
	loadMu sync.Mutex
	loaded bool
}

type sharedSnapshot struct{ namespace, hash string }

// keyLocks is a lock per shared snapshot. A snapshot's lock exists while it is held or
// waited for, so the map holds only the snapshots being pinned or collected.
type keyLocks struct {
	mu    sync.Mutex
	locks map[sharedSnapshot]*keyLock
	// waits, when set (tests), is called before a caller waits for a lock another holds.
	waits func(sharedSnapshot)
}

type keyLock struct {
	sync.Mutex
	// users are the callers holding or waiting for the lock.
	users int
}

// lock locks key's lock and returns its unlock.
func (k *keyLocks) lock(key sharedSnapshot) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[sharedSnapshot]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.users++
	waits := k.waits
	if l.users == 1 {
		waits = nil
	}
	k.mu.Unlock()
	if waits != nil {
		waits(key)
	}
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		defer k.mu.Unlock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
	}
}

// held is how many snapshots' locks are held or waited for.
func (k *keyLocks) held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.locks)
}

type pinnedSpec struct {
	uid  types.UID
	spec *trainer.TrainingRuntimeSpec
	// shared is the hash of the shared snapshot spec is, "" for a job's own.
	shared string
}

// maxDistinctSnapshots bounds the decoded snapshots kept for sharing; past it, sharing starts over.
const maxDistinctSnapshots = 1024

// snapshotPage is how many snapshots load lists per request.
const snapshotPage = 500

// get returns a copy of the TrainJob's decoded snapshot, if this process has it.
func (s *snapshotSpecs) get(tj *trainer.TrainJob) (*trainer.TrainingRuntimeSpec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byJob[client.ObjectKeyFromObject(tj)]
	if !ok || p.uid != tj.UID {
		return nil, false
	}
	return p.spec.DeepCopy(), true
}

// load lists the runtime snapshots (ConfigMaps labelled as such) of every namespace, once per
// process, and remembers each for the TrainJob that owns it, or as the shared snapshot it is,
// so that after a restart the jobs find their snapshots without a read each. Any snapshot created since is this
// process's own, remembered when it was created, or the previous leader's during a handover,
// which the create finds in the way and reads. Callers wait for a load under way; one that
// failed is tried again by the next.
func (s *snapshotSpecs) load(ctx context.Context, live client.Reader) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.loaded {
		return nil
	}
	snapshots := client.HasLabels{trainer.LabelRuntimeSnapshot}
	for page := ""; ; {
		list := &corev1.ConfigMapList{}
		if err := live.List(ctx, list, snapshots, client.Limit(snapshotPage), client.Continue(page)); err != nil {
			return err
		}
		for i := range list.Items {
			s.remember(&list.Items[i])
		}
		if page = list.Continue; page == "" {
			break
		}
	}
	s.loaded = true
	return nil
}

// remember keeps a listed snapshot for the TrainJob that owns it, if it is that job's (its
// controller and its name say so) and decodes; anything else is left for the job's own
// reconcile to find and report.
func (s *snapshotSpecs) remember(cm *corev1.ConfigMap) {
	if cm.Labels[trainer.LabelRuntimeSnapshot] == trainer.SharedSnapshot {
		if hash, ok := strings.CutPrefix(cm.Name, trainer.SharedRuntimeSnapshotName("")); ok && trainer.IsSharedRuntimeSnapshot(cm, hash) {
			_, _ = s.keepShared(cm.Namespace, hash, cm)
		}
		return
	}
	owner := metav1.GetControllerOf(cm)
	if owner == nil || owner.Kind != trainer.TrainJobKind || owner.APIVersion != trainer.GroupVersion.String() ||
		cm.Name != trainer.RuntimeSnapshotName(owner.Name) {
		return
	}
	key := types.NamespacedName{Namespace: cm.Namespace, Name: owner.Name}
	s.mu.Lock()
	_, known := s.byJob[key]
	s.mu.Unlock()
	if known {
		return
	}
	_, _ = s.keep(key, owner.UID, cm)
}

// decode checks that cm is the TrainJob's snapshot, decodes it and remembers it for the job.
func (s *snapshotSpecs) decode(tj *trainer.TrainJob, cm *corev1.ConfigMap) (*trainer.TrainingRuntimeSpec, error) {
	if !metav1.IsControlledBy(cm, tj) {
		return nil, fmt.Errorf("%w: ConfigMap %s is not owned by this TrainJob: delete or rename it", errForeignSnapshot, cm.Name)
	}
	spec, err := s.keep(client.ObjectKeyFromObject(tj), tj.UID, cm)
	if err != nil {
		return nil, err
	}
	return spec.DeepCopy(), nil
}

// keep decodes cm (once per distinct content) and remembers it as the snapshot of the
// TrainJob key of that uid.
func (s *snapshotSpecs) keep(key types.NamespacedName, uid types.UID, cm *corev1.ConfigMap) (*trainer.TrainingRuntimeSpec, error) {
	spec, err := s.decoded(cm)
	if err != nil {
		return nil, err
	}
	s.pin(key, pinnedSpec{uid: uid, spec: spec})
	return spec, nil
}

// decoded is cm's snapshot, decoded once per distinct content: the jobs of one runtime
// version share one copy.
func (s *snapshotSpecs) decoded(cm *corev1.ConfigMap) (*trainer.TrainingRuntimeSpec, error) {
	data := cm.Data[trainer.RuntimeSnapshotKey]
	s.mu.Lock()
	spec, ok := s.byData[data]
	s.mu.Unlock()
	if ok {
		return spec, nil
	}
	snap, err := trainer.DecodeRuntimeSnapshot(cm)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byData == nil || len(s.byData) >= maxDistinctSnapshots {
		s.byData = map[string]*trainer.TrainingRuntimeSpec{}
	}
	s.byData[data] = &snap.Spec
	return &snap.Spec, nil
}

// pinShared pins tj to the shared snapshot of that hash, if this process has it.
func (s *snapshotSpecs) pinShared(tj *trainer.TrainJob, hash string) (*trainer.TrainingRuntimeSpec, bool) {
	s.mu.Lock()
	spec, ok := s.shared[sharedSnapshot{tj.Namespace, hash}]
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	s.pinTo(tj, spec, hash)
	return spec.DeepCopy(), true
}

// pinTo remembers spec, the shared snapshot of hash, as tj's snapshot.
func (s *snapshotSpecs) pinTo(tj *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec, hash string) {
	s.pin(client.ObjectKeyFromObject(tj), pinnedSpec{uid: tj.UID, spec: spec, shared: hash})
}

// pin remembers p as the snapshot of the TrainJob key.
func (s *snapshotSpecs) pin(key types.NamespacedName, p pinnedSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byJob == nil {
		s.byJob = map[types.NamespacedName]pinnedSpec{}
	}
	s.byJob[key] = p
}

// keepShared decodes cm (once per distinct content) and remembers it as the shared snapshot of
// that hash in its namespace.
func (s *snapshotSpecs) keepShared(namespace, hash string, cm *corev1.ConfigMap) (*trainer.TrainingRuntimeSpec, error) {
	spec, err := s.decoded(cm)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shared == nil {
		s.shared = map[sharedSnapshot]*trainer.TrainingRuntimeSpec{}
	}
	s.shared[sharedSnapshot{namespace, hash}] = spec
	return spec, nil
}

// forgetShared forgets a shared snapshot (the collector deletes it).
func (s *snapshotSpecs) forgetShared(namespace, hash string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.shared, sharedSnapshot{namespace, hash})
}

// forget forgets a deleted job's snapshot; if it was a shared one, the collector looks soon
// whether another job still names it (runtime_snapshot_gc.go).
func (s *snapshotSpecs) forget(tj types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.byJob[tj]; ok && p.shared != "" {
		if s.unpinned == nil {
			s.unpinned = map[sharedSnapshot]bool{}
		}
		s.unpinned[sharedSnapshot{tj.Namespace, p.shared}] = true
		select {
		case s.check <- struct{}{}:
		default:
		}
	}
	delete(s.byJob, tj)
}

// takeUnpinned returns the shared snapshots a deleted job was pinned to since the last call.
func (s *snapshotSpecs) takeUnpinned() map[sharedSnapshot]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.unpinned
	s.unpinned = nil
	return out
}

// runPolicy is the TrainJob's deadline and TTL: its own, else its pinned runtime's.
func (r *Reconciler) runPolicy(ctx context.Context, tj *trainer.TrainJob) (trainer.EffectiveRunPolicy, error) {
	policy, err := r.resolveRunPolicy(ctx, tj)
	return ttlOwnedElsewhere(tj, policy), err
}

func (r *Reconciler) resolveRunPolicy(ctx context.Context, tj *trainer.TrainJob) (trainer.EffectiveRunPolicy, error) {
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
