package testing

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// TrainJobWrapper builds a TrainJob.
type TrainJobWrapper struct{ trainer.TrainJob }

// MakeTrainJob is a TrainJob on the ClusterTrainingRuntime torch-distributed, with a UID
// derived from its name (what the apiserver would give it; owner references need one).
func MakeTrainJob(name, ns string) *TrainJobWrapper {
	return &TrainJobWrapper{trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Generation: 1},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}},
	}}
}

// Obj returns the TrainJob.
func (w *TrainJobWrapper) Obj() *trainer.TrainJob { return &w.TrainJob }

// Clone returns a builder of a copy.
func (w *TrainJobWrapper) Clone() *TrainJobWrapper {
	return &TrainJobWrapper{*w.DeepCopy()}
}

// UID sets metadata.uid.
func (w *TrainJobWrapper) UID(uid string) *TrainJobWrapper {
	w.ObjectMeta.UID = types.UID(uid)
	return w
}

// Generation sets metadata.generation.
func (w *TrainJobWrapper) Generation(g int64) *TrainJobWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Created sets metadata.creationTimestamp.
func (w *TrainJobWrapper) Created(t time.Time) *TrainJobWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Label sets a label.
func (w *TrainJobWrapper) Label(k, v string) *TrainJobWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Queue puts the TrainJob in a Kueue LocalQueue.
// Annotation sets an annotation.
func (w *TrainJobWrapper) Annotation(k, v string) *TrainJobWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

func (w *TrainJobWrapper) Queue(name string) *TrainJobWrapper {
	return w.Label(trainer.KueueQueueNameLabel, name)
}

// RuntimeRef points the TrainJob at a runtime of kind (TrainingRuntime or ClusterTrainingRuntime).
func (w *TrainJobWrapper) RuntimeRef(kind, name string) *TrainJobWrapper {
	w.Spec.RuntimeRef = trainer.RuntimeRef{Name: name, Kind: ptr.To(kind), APIGroup: ptr.To(trainer.GroupVersion.Group)}
	return w
}

// Suspend sets spec.suspend.
func (w *TrainJobWrapper) Suspend(s bool) *TrainJobWrapper {
	w.Spec.Suspend = ptr.To(s)
	return w
}

// ManagedBy sets spec.managedBy.
func (w *TrainJobWrapper) ManagedBy(m string) *TrainJobWrapper {
	w.Spec.ManagedBy = ptr.To(m)
	return w
}

// ActiveDeadlineSeconds sets spec.activeDeadlineSeconds.
func (w *TrainJobWrapper) ActiveDeadlineSeconds(s int64) *TrainJobWrapper {
	w.Spec.ActiveDeadlineSeconds = ptr.To(s)
	return w
}

// TTLSecondsAfterFinished sets spec.ttlSecondsAfterFinished.
func (w *TrainJobWrapper) TTLSecondsAfterFinished(s int32) *TrainJobWrapper {
	w.Spec.TTLSecondsAfterFinished = ptr.To(s)
	return w
}

func (w *TrainJobWrapper) trainer() *trainer.Trainer {
	if w.Spec.Trainer == nil {
		w.Spec.Trainer = &trainer.Trainer{}
	}
	return w.Spec.Trainer
}

// Image sets spec.trainer.image.
func (w *TrainJobWrapper) Image(image string) *TrainJobWrapper {
	w.trainer().Image = ptr.To(image)
	return w
}

// Command sets spec.trainer.command.
func (w *TrainJobWrapper) Command(cmd ...string) *TrainJobWrapper {
	w.trainer().Command = cmd
	return w
}

// NumNodes sets spec.trainer.numNodes.
func (w *TrainJobWrapper) NumNodes(n int32) *TrainJobWrapper {
	w.trainer().NumNodes = ptr.To(n)
	return w
}

// NumProcPerNode sets spec.trainer.numProcPerNode.
func (w *TrainJobWrapper) NumProcPerNode(n int32) *TrainJobWrapper {
	w.trainer().NumProcPerNode = ptr.To(n)
	return w
}

// ResourcesPerNode sets spec.trainer.resourcesPerNode.
func (w *TrainJobWrapper) ResourcesPerNode(r corev1.ResourceRequirements) *TrainJobWrapper {
	w.trainer().ResourcesPerNode = &r
	return w
}

// Env adds an environment variable to spec.trainer.env.
func (w *TrainJobWrapper) Env(name, value string) *TrainJobWrapper {
	w.trainer().Env = append(w.trainer().Env, corev1.EnvVar{Name: name, Value: value})
	return w
}

// RuntimePatch appends a runtime patch.
func (w *TrainJobWrapper) RuntimePatch(p trainer.RuntimePatch) *TrainJobWrapper {
	w.Spec.RuntimePatches = append(w.Spec.RuntimePatches, p)
	return w
}

// StartTime sets status.startTime.
func (w *TrainJobWrapper) StartTime(t time.Time) *TrainJobWrapper {
	w.Status.StartTime = ptr.To(metav1.NewTime(t))
	return w
}

// CompletionTime sets status.completionTime.
func (w *TrainJobWrapper) CompletionTime(t time.Time) *TrainJobWrapper {
	w.Status.CompletionTime = ptr.To(metav1.NewTime(t))
	return w
}

// Condition sets a status condition (its observedGeneration is the job's generation).
func (w *TrainJobWrapper) Condition(t string, s metav1.ConditionStatus, reason, message string) *TrainJobWrapper {
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: reason, Message: message, ObservedGeneration: w.ObjectMeta.Generation,
	})
	return w
}

// RuntimeWrapper builds a TrainingRuntime or a ClusterTrainingRuntime.
type RuntimeWrapper struct {
	meta metav1.ObjectMeta
	spec trainer.TrainingRuntimeSpec
}

// MakeRuntime is a torch runtime of one node, one replicated job "node" with a trainer
// container "node" asking for one GPU: the shape of the catalog's torch-distributed.
// Name it with TrainingRuntime(ns) or ClusterTrainingRuntime().
func MakeRuntime(name string) *RuntimeWrapper {
	return &RuntimeWrapper{
		meta: metav1.ObjectMeta{Name: name, Labels: map[string]string{trainer.LabelFramework: "torch"}},
		spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{
				ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
					Name: trainer.NodeName,
					Template: batchv1.JobTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.LabelTrainJobAncestor: trainer.AncestorTrainer}},
						Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
							Containers: []corev1.Container{{
								Name:      trainer.NodeName,
								Image:     "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
								Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
							}},
						}}},
					},
				}},
			}},
		},
	}
}

// RunPolicy sets spec.runPolicy; nil leaves a value unset.
func (w *RuntimeWrapper) RunPolicy(activeDeadlineSeconds *int64, ttlSecondsAfterFinished *int32) *RuntimeWrapper {
	w.spec.RunPolicy = &trainer.RunPolicy{ActiveDeadlineSeconds: activeDeadlineSeconds, TTLSecondsAfterFinished: ttlSecondsAfterFinished}
	return w
}

// NumNodes sets spec.mlPolicy.numNodes.
func (w *RuntimeWrapper) NumNodes(n int32) *RuntimeWrapper {
	w.spec.MLPolicy.NumNodes = ptr.To(n)
	return w
}

// Volume adds a volume to the trainer's pods.
func (w *RuntimeWrapper) Volume(v corev1.Volume) *RuntimeWrapper {
	pod := &w.spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	pod.Volumes = append(pod.Volumes, v)
	return w
}

// Command sets the trainer container's command.
func (w *RuntimeWrapper) Command(cmd ...string) *RuntimeWrapper {
	w.spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Command = cmd
	return w
}

// Spec returns the runtime's spec.
func (w *RuntimeWrapper) Spec() *trainer.TrainingRuntimeSpec { return w.spec.DeepCopy() }

// ClusterTrainingRuntime returns the runtime as a ClusterTrainingRuntime.
func (w *RuntimeWrapper) ClusterTrainingRuntime() *trainer.ClusterTrainingRuntime {
	return &trainer.ClusterTrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.ClusterTrainingRuntimeKind},
		ObjectMeta: *w.meta.DeepCopy(),
		Spec:       *w.spec.DeepCopy(),
	}
}

// TrainingRuntime returns the runtime as a TrainingRuntime in namespace ns.
func (w *RuntimeWrapper) TrainingRuntime(ns string) *trainer.TrainingRuntime {
	m := *w.meta.DeepCopy()
	m.Namespace = ns
	return &trainer.TrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
		ObjectMeta: m,
		Spec:       *w.spec.DeepCopy(),
	}
}

// JobSetWrapper builds a JobSet as the JobSet controller reports it.
type JobSetWrapper struct{ jobsetv1alpha2.JobSet }

// MakeJobSet is a JobSet of the TrainJob tj (same name and namespace, controlled by it).
func MakeJobSet(tj *trainer.TrainJob) *JobSetWrapper {
	return &JobSetWrapper{jobsetv1alpha2.JobSet{
		TypeMeta: metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: tj.Name, Namespace: tj.Namespace, UID: types.UID("uid-jobset-" + tj.Name), Generation: 1,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: tj.Name, UID: tj.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
	}}
}

// Obj returns the JobSet.
func (w *JobSetWrapper) Obj() *jobsetv1alpha2.JobSet { return &w.JobSet }

// Suspend sets spec.suspend.
func (w *JobSetWrapper) Suspend(s bool) *JobSetWrapper {
	w.Spec.Suspend = ptr.To(s)
	return w
}

// OwnedBy replaces the JobSet's controller with a TrainJob of that name and UID.
func (w *JobSetWrapper) OwnedBy(name, uid string) *JobSetWrapper {
	w.OwnerReferences[0].Name, w.OwnerReferences[0].UID = name, types.UID(uid)
	return w
}

// ReplicatedJobStatus adds the counts of a replicated job's Jobs.
func (w *JobSetWrapper) ReplicatedJobStatus(name string, ready, succeeded, failed, active, suspended int32) *JobSetWrapper {
	w.Status.ReplicatedJobsStatus = append(w.Status.ReplicatedJobsStatus, jobsetv1alpha2.ReplicatedJobStatus{
		Name: name, Ready: ready, Succeeded: succeeded, Failed: failed, Active: active, Suspended: suspended,
	})
	return w
}

// Condition sets a status condition (Completed, Failed, Suspended, ...).
func (w *JobSetWrapper) Condition(t jobsetv1alpha2.JobSetConditionType, s metav1.ConditionStatus, reason, message string) *JobSetWrapper {
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: string(t), Status: s, Reason: reason, Message: message})
	return w
}

// CronTrainJobWrapper builds a CronTrainJob.
type CronTrainJobWrapper struct{ kiln.CronTrainJob }

// MakeCronTrainJob is a CronTrainJob running hourly in UTC, with CronJob's defaults (Allow,
// three successful and one failed run kept), whose runs use the ClusterTrainingRuntime
// torch-distributed, and with a UID derived from its name (its runs' owner references
// need one).
func MakeCronTrainJob(name, ns string) *CronTrainJobWrapper {
	return &CronTrainJobWrapper{kiln.CronTrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kiln.GroupVersion.String(), Kind: kiln.CronTrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Generation: 1},
		Spec: kiln.CronTrainJobSpec{
			Schedule: "0 * * * *", ConcurrencyPolicy: kiln.AllowConcurrent, Suspend: ptr.To(false),
			SuccessfulJobsHistoryLimit: ptr.To[int32](3), FailedJobsHistoryLimit: ptr.To[int32](1),
			TrainJobTemplate: kiln.TrainJobTemplateSpec{Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}}},
		},
	}}
}

// Obj returns the CronTrainJob.
func (w *CronTrainJobWrapper) Obj() *kiln.CronTrainJob { return &w.CronTrainJob }

// Clone returns a builder of a copy.
func (w *CronTrainJobWrapper) Clone() *CronTrainJobWrapper {
	return &CronTrainJobWrapper{*w.DeepCopy()}
}

// Generation sets metadata.generation.
func (w *CronTrainJobWrapper) Generation(g int64) *CronTrainJobWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// Created sets metadata.creationTimestamp.
func (w *CronTrainJobWrapper) Created(t time.Time) *CronTrainJobWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Schedule sets spec.schedule.
func (w *CronTrainJobWrapper) Schedule(expr string) *CronTrainJobWrapper {
	w.Spec.Schedule = expr
	return w
}

// TimeZone sets spec.timeZone.
func (w *CronTrainJobWrapper) TimeZone(tz string) *CronTrainJobWrapper {
	w.Spec.TimeZone = ptr.To(tz)
	return w
}

// StartingDeadlineSeconds sets spec.startingDeadlineSeconds.
func (w *CronTrainJobWrapper) StartingDeadlineSeconds(s int64) *CronTrainJobWrapper {
	w.Spec.StartingDeadlineSeconds = ptr.To(s)
	return w
}

// ConcurrencyPolicy sets spec.concurrencyPolicy.
func (w *CronTrainJobWrapper) ConcurrencyPolicy(p kiln.ConcurrencyPolicy) *CronTrainJobWrapper {
	w.Spec.ConcurrencyPolicy = p
	return w
}

// Suspend sets spec.suspend.
func (w *CronTrainJobWrapper) Suspend(s bool) *CronTrainJobWrapper {
	w.Spec.Suspend = ptr.To(s)
	return w
}

// HistoryLimits sets spec.successfulJobsHistoryLimit and spec.failedJobsHistoryLimit.
func (w *CronTrainJobWrapper) HistoryLimits(successful, failed int32) *CronTrainJobWrapper {
	w.Spec.SuccessfulJobsHistoryLimit, w.Spec.FailedJobsHistoryLimit = ptr.To(successful), ptr.To(failed)
	return w
}

// Env adds an environment variable to the runs' spec.trainer.env.
func (w *CronTrainJobWrapper) Env(name, value string) *CronTrainJobWrapper {
	tmpl := &w.Spec.TrainJobTemplate.Spec
	if tmpl.Trainer == nil {
		tmpl.Trainer = &trainer.Trainer{}
	}
	tmpl.Trainer.Env = append(tmpl.Trainer.Env, corev1.EnvVar{Name: name, Value: value})
	return w
}

// LastScheduleTime sets status.lastScheduleTime.
func (w *CronTrainJobWrapper) LastScheduleTime(t time.Time) *CronTrainJobWrapper {
	w.Status.LastScheduleTime = ptr.To(metav1.NewTime(t))
	return w
}

// Run is a builder of the run scheduled at t, as the controller creates it (with a UID
// derived from its name).
func (w *CronTrainJobWrapper) Run(t time.Time) *TrainJobWrapper {
	tj := w.NewRun(t)
	tj.UID = types.UID("uid-" + tj.Name)
	tj.Generation = 1
	return &TrainJobWrapper{*tj}
}
