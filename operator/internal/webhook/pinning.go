package webhook

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// runtimeOf reads a new TrainJob's runtime from the cache: nil when it cannot be read (the
// validator reports why, reading past the cache).
func (d *Defaulter) runtimeOf(ctx context.Context, tj *trainer.TrainJob) (client.Object, *trainer.TrainingRuntimeSpec) {
	if d.runtimes == nil {
		return nil, nil
	}
	key := client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}
	switch ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind) {
	case trainer.ClusterTrainingRuntimeKind:
		rt := &trainer.ClusterTrainingRuntime{}
		if d.runtimes.Get(ctx, key, rt) != nil {
			return nil, nil
		}
		return rt, &rt.Spec
	case trainer.TrainingRuntimeKind:
		rt := &trainer.TrainingRuntime{}
		key.Namespace = tj.Namespace
		if d.runtimes.Get(ctx, key, rt) != nil {
			return nil, nil
		}
		return rt, &rt.Spec
	}
	return nil, nil
}

// stampSnapshot stamps a new TrainJob with the hash of the runtime it is admitted against
// (trainer.AnnotationRuntimeSnapshot), or removes a stamp it came with when its runtime cannot
// be read: the operator pins the jobs of one runtime version to one shared snapshot instead of
// a ConfigMap each (a write less per job). The stamp is never the client's: a copy of a job
// from another cluster (MultiKueue's) is stamped with this cluster's runtime.
func (d *Defaulter) stampSnapshot(tj *trainer.TrainJob, rt client.Object, spec *trainer.TrainingRuntimeSpec) {
	hash := ""
	if rt != nil {
		hash = d.hashes.of(tj, rt, spec)
	}
	if hash == "" {
		delete(tj.Annotations, trainer.AnnotationRuntimeSnapshot)
		return
	}
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	tj.Annotations[trainer.AnnotationRuntimeSnapshot] = hash
}

// keepSnapshotStamp keeps the stamp of a TrainJob as it was: no update adds, changes or
// removes it (Kueue's updates, written with upstream's types, keep annotations as they are).
func keepSnapshotStamp(prev, tj *trainer.TrainJob) {
	hash, ok := prev.Annotations[trainer.AnnotationRuntimeSnapshot]
	if !ok {
		delete(tj.Annotations, trainer.AnnotationRuntimeSnapshot)
		return
	}
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	tj.Annotations[trainer.AnnotationRuntimeSnapshot] = hash
}

// snapshotHashes remembers the hash of each runtime version: a create does not encode its
// runtime again while the runtime is unchanged.
type snapshotHashes struct {
	mu sync.Mutex
	by map[types.UID]hashAt
}

type hashAt struct {
	resourceVersion string
	hash            string
}

// maxHashes bounds the runtimes remembered; past it, remembering starts over.
const maxHashes = 256

// of is the hash of the snapshot the operator would take of rt for tj, as it encodes it
// (runtime_snapshot.go): "" if it cannot be encoded.
func (h *snapshotHashes) of(tj *trainer.TrainJob, rt client.Object, spec *trainer.TrainingRuntimeSpec) string {
	h.mu.Lock()
	got, ok := h.by[rt.GetUID()]
	h.mu.Unlock()
	if ok && got.resourceVersion == rt.GetResourceVersion() {
		return got.hash
	}
	_, hash, err := trainer.EncodeRuntimeSnapshot(&trainer.RuntimeSnapshot{
		Kind: ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind), Name: tj.Spec.RuntimeRef.Name, Spec: *spec,
	})
	if err != nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil || len(h.by) >= maxHashes {
		h.by = map[types.UID]hashAt{}
	}
	h.by[rt.GetUID()] = hashAt{resourceVersion: rt.GetResourceVersion(), hash: hash}
	return hash
}
