// Package view is the API's view of Kubernetes objects: a TrainJob and what it owns (its
// Kueue workload, queue position, pods) as one truthful state, steps and timers; a
// CronTrainJob, a runtime, a queue, an event. Everything here is pure: no clients, no
// clocks. Reading what a caller sends into objects is package request's.
package view

import (
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Related is what the API shows of a TrainJob besides the TrainJob itself.
type Related struct {
	// Workload is its Kueue Workload (nil: none, or Kueue is absent).
	Workload *Workload
	// Position is where the Workload waits in its queues (nil: not computed).
	Position *kilnv1.QueuePosition
	// RunPolicy is the runtime's, as the job was pinned to it (nil: none or unknown).
	RunPolicy *trainer.RunPolicy
	// Pods are its JobSet's pods; nil leaves the steps out.
	Pods []corev1.Pod
	// StartingPods are its JobSet's pods while it starts (nil: not read), to say what they
	// wait for (Blocked) without listing them as steps.
	StartingPods []corev1.Pod
	// Levels name the levels of the Topology the job's queue places on (nil: none, or not
	// read).
	Levels []kueue.Level
	// Placement is where Kueue placed its pods on that Topology (nil: not placed by topology).
	Placement *kilnv1.Placement
}

// TrainJob is the API's view of a TrainJob.
func TrainJob(tj *trainer.TrainJob, rel Related) *kilnv1.TrainJob {
	out := &kilnv1.TrainJob{
		Name:            tj.Name,
		Namespace:       tj.Namespace,
		Uid:             string(tj.UID),
		ResourceVersion: tj.ResourceVersion,
		CreateTime:      timestamp(&tj.CreationTimestamp),
		Labels:          tj.Labels,
		Annotations:     userAnnotations(tj.Annotations),
		Spec:            specOf(tj, rel.Levels),
		Status:          statusOf(tj, rel),
	}
	return out
}

// userAnnotations drops kubectl's copy of the last applied manifest, which only repeats
// the job.
func userAnnotations(a map[string]string) map[string]string {
	if _, ok := a[corev1.LastAppliedConfigAnnotation]; !ok {
		return a
	}
	out := make(map[string]string, len(a))
	for k, v := range a {
		if k != corev1.LastAppliedConfigAnnotation {
			out[k] = v
		}
	}
	return out
}

func specOf(tj *trainer.TrainJob, levels []kueue.Level) *kilnv1.TrainJobSpec {
	s := &kilnv1.TrainJobSpec{
		Runtime:                 tj.Spec.RuntimeRef.Name,
		RuntimeKind:             runtimeKindOf(ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)),
		Queue:                   tj.Labels[trainer.KueueQueueNameLabel],
		PriorityClass:           tj.Labels[trainer.KueuePriorityClassLabel],
		Suspend:                 ptr.Deref(tj.Spec.Suspend, false),
		ActiveDeadlineSeconds:   tj.Spec.ActiveDeadlineSeconds,
		TtlSecondsAfterFinished: tj.Spec.TTLSecondsAfterFinished,
		Topology:                TopologyOf(tj, levels),
	}
	if t := tj.Spec.Trainer; t != nil {
		s.Image = ptr.Deref(t.Image, "")
		s.Command, s.Args = t.Command, t.Args
		for _, e := range t.Env {
			v := e.Value
			if e.ValueFrom != nil {
				v = "(from " + valueSource(e.ValueFrom) + ")"
			}
			s.Env = append(s.Env, &kilnv1.EnvVar{Name: e.Name, Value: v})
		}
		s.Nodes = ptr.Deref(t.NumNodes, 0)
		s.ProcsPerNode = ptr.Deref(t.NumProcPerNode, 0)
		if r := t.ResourcesPerNode; r != nil {
			s.ResourcesPerNode = &kilnv1.Resources{Requests: Quantities(r.Requests), Limits: Quantities(r.Limits)}
		}
	}
	if in := tj.Spec.Initializer; in != nil {
		if in.Dataset != nil {
			s.DatasetUri = ptr.Deref(in.Dataset.StorageUri, "")
		}
		if in.Model != nil {
			s.ModelUri = ptr.Deref(in.Model.StorageUri, "")
		}
	}
	return s
}

func valueSource(src *corev1.EnvVarSource) string {
	switch {
	case src.SecretKeyRef != nil:
		return "secret " + src.SecretKeyRef.Name + "/" + src.SecretKeyRef.Key
	case src.ConfigMapKeyRef != nil:
		return "config map " + src.ConfigMapKeyRef.Name + "/" + src.ConfigMapKeyRef.Key
	case src.FieldRef != nil:
		return "field " + src.FieldRef.FieldPath
	case src.ResourceFieldRef != nil:
		return "resource " + src.ResourceFieldRef.Resource
	}
	return "a source"
}

func runtimeKindOf(kind string) kilnv1.RuntimeKind {
	if kind == trainer.TrainingRuntimeKind {
		return kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED
	}
	return kilnv1.RuntimeKind_RUNTIME_KIND_CLUSTER
}

func statusOf(tj *trainer.TrainJob, rel Related) *kilnv1.TrainJobStatus {
	st := &kilnv1.TrainJobStatus{
		StartTime:      timestamp(tj.Status.StartTime),
		CompletionTime: timestamp(tj.Status.CompletionTime),
		Queue:          rel.Position,
		Placement:      rel.Placement,
	}
	if rel.Workload != nil {
		st.Cluster = rel.Workload.Cluster
	}
	st.State, st.Reason, st.Message = State(tj, rel.Workload)
	st.Status = Status(tj, st.State)
	if st.State == kilnv1.State_STATE_RUNNING && st.Reason == ReasonStarting {
		if reason, msg := Blocked(cmpOr(rel.Pods, rel.StartingPods)); reason != "" {
			st.Reason, st.Message = reason, msg
		}
	}
	policy := trainer.ResolveRunPolicy(&tj.Spec, rel.RunPolicy)
	st.ActiveDeadlineSeconds, st.TtlSecondsAfterFinished = policy.ActiveDeadlineSeconds, policy.TTLSecondsAfterFinished
	if st.State == kilnv1.State_STATE_RUNNING && tj.Status.StartTime != nil && policy.ActiveDeadlineSeconds != nil {
		st.DeadlineTime = timestamppb.New(tj.Status.StartTime.Add(time.Duration(*policy.ActiveDeadlineSeconds) * time.Second))
	}
	if tj.Status.CompletionTime != nil && policy.TTLSecondsAfterFinished != nil &&
		(st.State == kilnv1.State_STATE_COMPLETE || st.State == kilnv1.State_STATE_FAILED) {
		st.TtlDeleteTime = timestamppb.New(tj.Status.CompletionTime.Add(time.Duration(*policy.TTLSecondsAfterFinished) * time.Second))
	}
	if rel.Pods != nil {
		st.Steps = Steps(rel.Pods)
	}
	for _, js := range tj.Status.JobsStatus {
		st.Jobs = append(st.Jobs, &kilnv1.ReplicatedJobStatus{
			Name: js.Name, Ready: ptr.Deref(js.Ready, 0), Succeeded: ptr.Deref(js.Succeeded, 0), Failed: ptr.Deref(js.Failed, 0),
			Active: ptr.Deref(js.Active, 0), Suspended: ptr.Deref(js.Suspended, 0),
		})
	}
	st.Conditions = conditions(tj.Status.Conditions)
	if r := tj.Status.Restarts; r != nil {
		st.Restarts = &kilnv1.Restarts{
			Count: r.Count, CountedTowardsMax: r.CountedTowardsMax, MaxRestarts: r.MaxRestarts,
			LastReason: r.LastReason, LastMessage: r.LastMessage, LastRestartTime: timestamp(r.LastRestartTime),
		}
	}
	st.Progress = Progress(tj)
	return st
}

// conditions are the API's view of Kubernetes conditions, ordered by type.
func conditions(in []metav1.Condition) []*kilnv1.Condition {
	conds := slices.Clone(in)
	slices.SortStableFunc(conds, func(a, b metav1.Condition) int { return strings.Compare(a.Type, b.Type) })
	var out []*kilnv1.Condition
	for _, c := range conds {
		out = append(out, &kilnv1.Condition{
			Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			LastTransitionTime: timestamp(&c.LastTransitionTime), ObservedGeneration: c.ObservedGeneration,
		})
	}
	return out
}

func timestamp(t *metav1.Time) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	return timestamppb.New(t.Time)
}

// cmpOr is the first of a and b that is not nil.
func cmpOr(a, b []corev1.Pod) []corev1.Pod {
	if a != nil {
		return a
	}
	return b
}
