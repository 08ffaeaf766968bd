package trainjob

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// DefaultSnapshotSweep is how often the shared runtime snapshots no TrainJob names any more are
// deleted. An unreferenced one costs a ConfigMap until then, nothing else.
const DefaultSnapshotSweep = 10 * time.Minute

// WithSnapshotSweep sets how often the unreferenced shared snapshots are deleted.
func (r *Reconciler) WithSnapshotSweep(every time.Duration) *Reconciler {
	r.snapshotSweep = every
	return r
}

// unpinnedSettle is how long the collector lets deletions land before it looks at the shared
// snapshots deleted jobs were pinned to: a burst of TTL deletions is one look per snapshot.
const unpinnedSettle = 2 * time.Second

// collectSnapshots deletes the shared runtime snapshots that no TrainJob of their namespace is
// stamped with (trainer.AnnotationRuntimeSnapshot): the garbage collector cannot, a shared
// snapshot having no owner. It looks at a snapshot soon after a job pinned to it is deleted,
// and at all of them every snapshotSweep (jobs deleted while no process had pinned them). It
// runs on the leader (a manager Runnable).
func (r *Reconciler) collectSnapshots(ctx context.Context) error {
	every := r.snapshotSweep
	if every <= 0 {
		every = DefaultSnapshotSweep
	}
	t := time.NewTicker(every)
	defer t.Stop()
	logger := klog.FromContext(ctx)
	for {
		var n int
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			n, err = r.sweepSnapshots(ctx)
		case <-r.snapshots.check:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(unpinnedSettle):
			}
			n, err = r.collectUnpinned(ctx)
		}
		if err != nil {
			logger.Error(err, "Deleting unreferenced runtime snapshots", "deleted", n)
		} else if n > 0 {
			logger.V(1).Info("Deleted unreferenced runtime snapshots", "deleted", n)
		}
	}
}

// collectUnpinned deletes the shared snapshots deleted jobs were pinned to that no job names
// any more, and says how many.
func (r *Reconciler) collectUnpinned(ctx context.Context) (int, error) {
	deleted := 0
	for s := range r.snapshots.takeUnpinned() {
		cm := &corev1.ConfigMap{}
		err := r.live.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: trainer.SharedRuntimeSnapshotName(s.hash)}, cm)
		if apierrors.IsNotFound(err) || (err == nil && !trainer.IsSharedRuntimeSnapshot(cm, s.hash)) {
			continue
		}
		if err != nil {
			return deleted, err
		}
		gone, err := r.deleteUnreferenced(ctx, cm, s.hash)
		if err != nil {
			return deleted, err
		}
		if gone {
			deleted++
		}
	}
	return deleted, nil
}

// sweepSnapshots deletes the shared snapshots no TrainJob names, and says how many.
func (r *Reconciler) sweepSnapshots(ctx context.Context) (int, error) {
	referenced, err := r.stampedHashes(ctx, "")
	if err != nil {
		return 0, err
	}
	deleted := 0
	shared := client.MatchingLabels{trainer.LabelRuntimeSnapshot: trainer.SharedSnapshot}
	for page := ""; ; {
		list := &corev1.ConfigMapList{}
		if err := r.live.List(ctx, list, shared, client.Limit(snapshotPage), client.Continue(page)); err != nil {
			return deleted, err
		}
		for i := range list.Items {
			cm := &list.Items[i]
			hash, ok := strings.CutPrefix(cm.Name, trainer.SharedRuntimeSnapshotName(""))
			// Someone else's ConfigMap under the label is left alone.
			if !ok || !trainer.IsSharedRuntimeSnapshot(cm, hash) || referenced[sharedSnapshot{cm.Namespace, hash}] {
				continue
			}
			gone, err := r.deleteUnreferenced(ctx, cm, hash)
			if err != nil {
				return deleted, err
			}
			if gone {
				deleted++
			}
		}
		if page = list.Continue; page == "" {
			return deleted, nil
		}
	}
}

// deleteUnreferenced deletes a shared snapshot if, looked at again under its pinning lock, no
// TrainJob of its namespace names it: a job that came since the sweep's first look either is
// seen now, or pins after the deletion and stores the snapshot again (or one of its own, if
// its runtime changed meanwhile).
func (r *Reconciler) deleteUnreferenced(ctx context.Context, cm *corev1.ConfigMap, hash string) (bool, error) {
	defer r.snapshots.sharedLocks.lock(sharedSnapshot{cm.Namespace, hash})()
	referenced, err := r.stampedHashes(ctx, cm.Namespace)
	if err != nil || referenced[sharedSnapshot{cm.Namespace, hash}] {
		return false, err
	}
	r.snapshots.forgetShared(cm.Namespace, hash)
	err = r.client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
	return err == nil, client.IgnoreNotFound(err)
}

// stampedHashes are the snapshot hashes the cached TrainJobs of namespace (all if "") are
// stamped with. The jobs are read in place, not copied.
func (r *Reconciler) stampedHashes(ctx context.Context, namespace string) (map[sharedSnapshot]bool, error) {
	list := &trainer.TrainJobList{}
	if err := r.client.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	hashes := map[sharedSnapshot]bool{}
	for i := range list.Items {
		if hash := list.Items[i].Annotations[trainer.AnnotationRuntimeSnapshot]; hash != "" {
			hashes[sharedSnapshot{list.Items[i].Namespace, hash}] = true
		}
	}
	return hashes, nil
}
