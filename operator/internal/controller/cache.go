package controller

import (
	"encoding/json"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// CacheOptions shape the manager's informer cache to what the controller reads, which is
// most of its memory with thousands of TrainJobs:
//   - ConfigMaps: none (ClientOptions). The controller keeps the runtime snapshots it
//     needs decoded, one copy per distinct content (runtime_snapshot.go).
//   - JobSets: no replicated jobs. The controller reads a JobSet's owner, suspension,
//     failure policy and status; it writes JobSets by server-side apply from its own
//     rendering, never from the cache. A replicated job is a Job template, most of a
//     cached JobSet even with its pod template emptied (docs/performance.md, "Cached
//     JobSets without their replicated jobs").
//   - TrainJobs: of their managedFields, only which writers own spec.suspend and when
//     they wrote (how a resume is timed). Safe because the controller writes a TrainJob
//     only through its status subresource, where the apiserver ignores the request's
//     managedFields and keeps the stored ones.
//   - No managedFields on anything else.
//   - The strings that every cached TrainJob or JobSet repeats (its namespace, its owner's
//     kind, its conditions' reasons) stored once.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&jobsetv1alpha2.JobSet{}: {Transform: chain(cache.TransformStripManagedFields(), stripReplicatedJobs, internJobSet)},
			&trainer.TrainJob{}:      {Transform: chain(keepSuspendOwners, internTrainJob)},
			// Of a node, what it offers (the webhook's advice): the rest of a node is most of it.
			&corev1.Node{}: {Transform: keepAllocatable},
			// Only the pods whose logs are kept (attemptlogs), and of them what it reads.
			&corev1.Pod{}: {
				Label:     labels.SelectorFromSet(labels.Set{kiln.LabelKeepLogs: "true"}),
				Transform: chain(cache.TransformStripManagedFields(), stripPodSpec),
			},
		},
	}
}

// keepAllocatable keeps of a node its name and allocatable resources.
func keepAllocatable(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
			Status:     corev1.NodeStatus{Allocatable: n.Status.Allocatable},
		}, nil
	}
	return obj, nil
}

// stripPodSpec keeps of a pod's spec its node and its containers' names.
func stripPodSpec(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		containers := make([]corev1.Container, len(pod.Spec.Containers))
		for i, c := range pod.Spec.Containers {
			containers[i] = corev1.Container{Name: c.Name}
		}
		pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName, Containers: containers}
	}
	return obj, nil
}

// ClientOptions keep Secrets and ConfigMaps out of the cache: a read of one through the
// manager's client would start an informer holding every one of the cluster. The
// controller reads a Secret only when it creates an MPI job's SSH key, and ConfigMaps not
// at all (the runtime snapshots are listed once, runtime_snapshot.go; kept logs are read live).
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
}

func chain(fs ...func(any) (any, error)) func(any) (any, error) {
	return func(obj any) (any, error) {
		var err error
		for _, f := range fs {
			if obj, err = f(obj); err != nil {
				return nil, err
			}
		}
		return obj, nil
	}
}

func stripReplicatedJobs(obj any) (any, error) {
	if js, ok := obj.(*jobsetv1alpha2.JobSet); ok {
		js.Spec.ReplicatedJobs = nil
	}
	return obj, nil
}

// suspendOnly is the fieldsV1 of a managedFields entry that owns spec.suspend, whatever
// else it owns.
var suspendOnly = func() []byte {
	data, _ := json.Marshal(map[string]any{"f:spec": map[string]any{"f:suspend": map[string]any{}}})
	return data
}()

// keepSuspendOwners drops the managedFields entries that do not own spec.suspend and the
// rest of the fields of those that do.
func keepSuspendOwners(obj any) (any, error) {
	tj, ok := obj.(*trainer.TrainJob)
	if !ok {
		return obj, nil
	}
	var kept []metav1.ManagedFieldsEntry
	for _, mf := range tj.ManagedFields {
		if mf.Subresource != "" || mf.FieldsV1 == nil || !OwnsSuspend(mf.FieldsV1.GetRawBytes()) {
			continue
		}
		// One shared slice for every cached TrainJob; the setters would copy it for each.
		mf.FieldsV1 = &metav1.FieldsV1{Raw: suspendOnly} //nolint:staticcheck // SA1019: sharing is the point
		kept = append(kept, mf)
	}
	tj.ManagedFields = kept
	return obj, nil
}

// intern returns s stored once for all the strings equal to it.
func intern(s string) string { return unique.Make(s).Value() }

func internPtr(s *string) {
	if s != nil {
		*s = intern(*s)
	}
}

// internMeta interns what the objects of a namespace and an owner's kind repeat.
func internMeta(m *metav1.ObjectMeta) {
	m.Namespace = intern(m.Namespace)
	for i := range m.OwnerReferences {
		o := &m.OwnerReferences[i]
		o.APIVersion, o.Kind = intern(o.APIVersion), intern(o.Kind)
	}
	for i := range m.ManagedFields {
		f := &m.ManagedFields[i]
		f.Manager, f.Operation, f.APIVersion, f.FieldsType = intern(f.Manager), metav1.ManagedFieldsOperationType(intern(string(f.Operation))), intern(f.APIVersion), intern(f.FieldsType)
	}
}

// internConditions interns the conditions' types, statuses and reasons; their messages
// often name the object, and stay its own.
func internConditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Status, c.Reason = intern(c.Type), metav1.ConditionStatus(intern(string(c.Status))), intern(c.Reason)
	}
}

func internJobSet(obj any) (any, error) {
	if js, ok := obj.(*jobsetv1alpha2.JobSet); ok {
		internMeta(&js.ObjectMeta)
		internPtr(js.Spec.ManagedBy)
		internConditions(js.Status.Conditions)
		js.Status.TerminalState = intern(js.Status.TerminalState)
		for i := range js.Status.ReplicatedJobsStatus {
			js.Status.ReplicatedJobsStatus[i].Name = intern(js.Status.ReplicatedJobsStatus[i].Name)
		}
	}
	return obj, nil
}

func internTrainJob(obj any) (any, error) {
	if tj, ok := obj.(*trainer.TrainJob); ok {
		internMeta(&tj.ObjectMeta)
		ref := &tj.Spec.RuntimeRef
		ref.Name = intern(ref.Name)
		internPtr(ref.APIGroup)
		internPtr(ref.Kind)
		internPtr(tj.Spec.ManagedBy)
		if t := tj.Spec.Trainer; t != nil {
			internPtr(t.Image)
		}
		for i := range tj.Spec.RuntimePatches {
			tj.Spec.RuntimePatches[i].Manager = intern(tj.Spec.RuntimePatches[i].Manager)
		}
		internConditions(tj.Status.Conditions)
		for i := range tj.Status.JobsStatus {
			tj.Status.JobsStatus[i].Name = intern(tj.Status.JobsStatus[i].Name)
		}
	}
	return obj, nil
}

// OwnsSuspend reports whether a managedFields entry (its fieldsV1) owns spec.suspend: the
// writes that suspend or resume a TrainJob, which time its resume (trainjob/suspension.go).
func OwnsSuspend(fieldsV1 []byte) bool {
	var fields struct {
		Spec map[string]json.RawMessage `json:"f:spec"`
	}
	if err := json.Unmarshal(fieldsV1, &fields); err != nil {
		return false
	}
	_, ok := fields.Spec["f:suspend"]
	return ok
}

// UnsuspendedAt is when a running TrainJob was last resumed, read from its managedFields:
// the latest instant at which a writer that owns spec.suspend changed the TrainJob. The
// resume happened at or before that instant and after the job was created, so a deadline
// counted from it is never early, and, unlike counting from when the operator first looks,
// it is not late by however long the operator was away. Nil when no writer owns
// spec.suspend (it was never set), or the job is suspended.
func UnsuspendedAt(tj *trainer.TrainJob, now time.Time) *time.Time {
	if tj.Spec.Suspend == nil || *tj.Spec.Suspend {
		return nil
	}
	var latest *time.Time
	for _, mf := range tj.ManagedFields {
		if mf.Subresource != "" || mf.Time == nil || mf.FieldsV1 == nil || !OwnsSuspend(mf.FieldsV1.GetRawBytes()) {
			continue
		}
		if t := mf.Time.Time; latest == nil || t.After(*latest) {
			latest = &t
		}
	}
	if latest == nil {
		return nil
	}
	if created := tj.CreationTimestamp.Time; latest.Before(created) {
		*latest = created
	}
	if latest.After(now) {
		*latest = now
	}
	return latest
}
