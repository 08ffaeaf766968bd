package service

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/lru"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

// views builds the API's view of TrainJobs from the shared cache: their Kueue workloads,
// queue positions, pinned run policies and pods. Callers authorize the TrainJob first; the
// pods (steps) are shown only to callers who may list pods.
type views struct {
	kube *kube.Clients

	// pinned holds the run policy of each job whose runtime snapshot was read, by
	// TrainJob UID: a snapshot never changes once the operator pinned the job, so it is
	// read (and copied out of the cache) once, not on every view. Least recently used
	// first out past maxPinned.
	pinned *lru.Cache
}

// maxPinned bounds the memory of views.pinned.
const maxPinned = 50_000

func newViews(k *kube.Clients) *views {
	return &views{kube: k, pinned: lru.New(maxPinned)}
}

// viewOptions say what a view includes.
type viewOptions struct {
	// steps adds the job's pods, when the caller may list pods.
	steps bool
	// position computes where a queued job waits.
	position bool
}

func (v *views) view(ctx context.Context, tj *trainer.TrainJob, o viewOptions) *kilnv1.TrainJob {
	rel := view.Related{RunPolicy: v.runPolicy(ctx, tj)}
	if v.kube.Kueue() && tj.Labels[trainer.KueueQueueNameLabel] != "" {
		rel.Workload = v.workload(ctx, tj)
		if o.position && rel.Workload != nil {
			rel.Position = v.position(ctx, rel.Workload)
		}
	}
	v.placement(ctx, tj, &rel)
	// A job that has started but none of whose pods is ready: its pods say what they wait for.
	state, reason, _ := view.State(tj, rel.Workload)
	starting := state == kilnv1.State_STATE_RUNNING && reason == view.ReasonStarting
	if o.steps || starting {
		if ok, _, err := v.kube.Authorizer.Allowed(ctx, kube.Attributes{Verb: "list", Resource: "pods", Namespace: tj.Namespace}); err == nil && ok {
			if o.steps {
				rel.Pods = v.pods(ctx, tj)
			} else {
				rel.StartingPods = v.pods(ctx, tj)
			}
		}
	}
	return view.TrainJob(tj, rel)
}

func (v *views) workload(ctx context.Context, tj *trainer.TrainJob) *view.Workload {
	list := kube.NewList(kube.WorkloadGVK)
	if err := v.kube.Cache.List(ctx, list, client.InNamespace(tj.Namespace), client.MatchingFields{kube.IndexJobUID: string(tj.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not read a TrainJob's workload", "trainJob", klog.KObj(tj), "err", err)
		return nil
	}
	// Kueue replaces a job's workload at times; the newest one is the job's. Its worker
	// cluster is the operator's (kueue.WorkerCluster): that of the latest admitted one that
	// names one, so that a replacement not dispatched yet does not hide where the job ran.
	var newest *unstructured.Unstructured
	for i := range list.Items {
		if wl := &list.Items[i]; newest == nil || newest.GetCreationTimestamp().Time.Before(wl.GetCreationTimestamp().Time) {
			newest = wl
		}
	}
	out := view.WorkloadFrom(newest)
	if out != nil && len(list.Items) > 1 {
		typed := make([]kueuev1beta2.Workload, 0, len(list.Items))
		for i := range list.Items {
			if kwl, err := kueue.Workload(&list.Items[i]); err == nil {
				typed = append(typed, *kwl)
			}
		}
		out.Cluster = kueue.WorkerCluster(typed)
	}
	return out
}

// position ranks wl among the pending workloads of its ClusterQueue.
func (v *views) position(ctx context.Context, wl *view.Workload) *kilnv1.QueuePosition {
	clusterQueueOf := map[string]string{}
	lqs := kube.NewList(kube.LocalQueueGVK)
	if err := v.kube.Cache.List(ctx, lqs, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	for i := range lqs.Items {
		if lq, err := kueue.LocalQueue(&lqs.Items[i]); err == nil {
			clusterQueueOf[lq.Namespace+"/"+lq.Name] = string(lq.Spec.ClusterQueue)
		}
	}
	cq, ok := clusterQueueOf[wl.Namespace+"/"+wl.LocalQueue]
	if !ok && wl.ClusterQueue == "" {
		// Kueue waits for the queue to be created: the job has no place in any queue yet.
		return &kilnv1.QueuePosition{LocalQueue: wl.LocalQueue, Workload: wl.Name, LocalQueueMissing: true}
	}
	var pending []*view.Workload
	if wl.Pending() {
		all := kube.NewList(kube.WorkloadGVK)
		if err := v.kube.Cache.List(ctx, all, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		for i := range all.Items {
			other := view.WorkloadFrom(&all.Items[i])
			if other.Pending() && clusterQueueOf[other.Namespace+"/"+other.LocalQueue] == cq {
				pending = append(pending, other)
			}
		}
	}
	return view.Position(wl, cq, pending)
}

func (v *views) pods(ctx context.Context, tj *trainer.TrainJob) []corev1.Pod {
	list := &corev1.PodList{}
	if err := v.kube.Cache.List(ctx, list, client.InNamespace(tj.Namespace), client.MatchingFields{kube.IndexJobSetName: tj.Name}, client.UnsafeDisableDeepCopy); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not read a TrainJob's pods", "trainJob", klog.KObj(tj), "err", err)
		return []corev1.Pod{}
	}
	// The JobSet named like the TrainJob is its own: the operator refuses any other.
	if list.Items == nil {
		return []corev1.Pod{}
	}
	return list.Items
}

// runPolicy is the runPolicy of the runtime the job was pinned to: from its runtime
// snapshot, else (not reconciled yet) the runtime as it is now.
func (v *views) runPolicy(ctx context.Context, tj *trainer.TrainJob) *trainer.RunPolicy {
	if tj.Spec.ActiveDeadlineSeconds != nil && tj.Spec.TTLSecondsAfterFinished != nil {
		return nil
	}
	if policy, ok := v.pinned.Get(tj.UID); ok {
		return policy.(*trainer.RunPolicy)
	}
	cm := &corev1.ConfigMap{}
	err := v.kube.Cache.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: trainer.RuntimeSnapshotName(tj.Name)}, cm)
	if err == nil && isOwnedBy(cm.OwnerReferences, tj.UID) {
		return v.pinnedPolicy(tj, cm)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil
	}
	// Most jobs share the snapshot of the runtime version they were admitted against.
	if hash := tj.Annotations[trainer.AnnotationRuntimeSnapshot]; hash != "" {
		err := v.kube.Cache.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: trainer.SharedRuntimeSnapshotName(hash)}, cm)
		if err == nil && trainer.IsSharedRuntimeSnapshot(cm, hash) {
			return v.pinnedPolicy(tj, cm)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil
		}
	}
	// Not pinned yet: the runtime as it is now, which is what the operator will pin.
	kind := ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)
	var spec *trainer.TrainingRuntimeSpec
	switch kind {
	case trainer.ClusterTrainingRuntimeKind:
		rt := &trainer.ClusterTrainingRuntime{}
		if v.kube.Cache.Get(ctx, client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, rt) == nil {
			spec = &rt.Spec
		}
	case trainer.TrainingRuntimeKind:
		rt := &trainer.TrainingRuntime{}
		if v.kube.Cache.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}, rt) == nil {
			spec = &rt.Spec
		}
	}
	if spec == nil {
		return nil
	}
	return spec.RunPolicy
}

// pinnedPolicy is the runPolicy of the job's snapshot cm, remembered for the job.
func (v *views) pinnedPolicy(tj *trainer.TrainJob, cm *corev1.ConfigMap) *trainer.RunPolicy {
	snap, err := trainer.DecodeRuntimeSnapshot(cm)
	if err != nil {
		return nil
	}
	v.pinned.Add(tj.UID, snap.Spec.RunPolicy)
	return snap.Spec.RunPolicy
}

func isOwnedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}
