package migrate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// The spec of the early TrainJob draft, kubeflow.org/v2alpha1 (later
// trainer.kubeflow.org/v2alpha1), across its revisions: trainingRuntimeRef became runtimeRef,
// and podSpecOverrides' targetReplicatedJobs became targetJobs.
type draftSpec struct {
	RuntimeRef         *draftRuntimeRef   `json:"runtimeRef,omitempty"`
	TrainingRuntimeRef *draftRuntimeRef   `json:"trainingRuntimeRef,omitempty"`
	Trainer            *draftTrainer      `json:"trainer,omitempty"`
	DatasetConfig      *draftStorage      `json:"datasetConfig,omitempty"`
	ModelConfig        *draftModelConfig  `json:"modelConfig,omitempty"`
	Labels             map[string]string  `json:"labels,omitempty"`
	Annotations        map[string]string  `json:"annotations,omitempty"`
	PodSpecOverrides   []draftPodOverride `json:"podSpecOverrides,omitempty"`
	Suspend            *bool              `json:"suspend,omitempty"`
	ManagedBy          *string            `json:"managedBy,omitempty"`
}

type draftRuntimeRef struct {
	Name     string  `json:"name"`
	APIGroup *string `json:"apiGroup,omitempty"`
	Kind     *string `json:"kind,omitempty"`
}

type draftTrainer struct {
	Image            *string                      `json:"image,omitempty"`
	Command          []string                     `json:"command,omitempty"`
	Args             []string                     `json:"args,omitempty"`
	Env              []corev1.EnvVar              `json:"env,omitempty"`
	NumNodes         *int32                       `json:"numNodes,omitempty"`
	ResourcesPerNode *corev1.ResourceRequirements `json:"resourcesPerNode,omitempty"`
	NumProcPerNode   *string                      `json:"numProcPerNode,omitempty"`
}

type draftStorage struct {
	StorageUri *string         `json:"storageUri,omitempty"` //nolint:revive // wire name
	Env        []corev1.EnvVar `json:"env,omitempty"`
	SecretRef  *struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"secretRef,omitempty"`
}

type draftModelConfig struct {
	Input  *draftStorage `json:"input,omitempty"`
	Output *draftStorage `json:"output,omitempty"`
}

type draftPodOverride struct {
	TargetReplicatedJobs []string `json:"targetReplicatedJobs,omitempty"`
	TargetJobs           []struct {
		Name string `json:"name"`
	} `json:"targetJobs,omitempty"`
	Containers         []draftContainerOverride `json:"containers,omitempty"`
	InitContainers     []draftContainerOverride `json:"initContainers,omitempty"`
	Volumes            []corev1.Volume          `json:"volumes,omitempty"`
	ServiceAccountName *string                  `json:"serviceAccountName,omitempty"`
	NodeSelector       map[string]string        `json:"nodeSelector,omitempty"`
	Tolerations        []corev1.Toleration      `json:"tolerations,omitempty"`
}

type draftContainerOverride struct {
	Name         string                 `json:"name"`
	Command      []string               `json:"command,omitempty"`
	Args         []string               `json:"args,omitempty"`
	Env          []corev1.EnvVar        `json:"env,omitempty"`
	EnvFrom      []corev1.EnvFromSource `json:"envFrom,omitempty"`
	VolumeMounts []corev1.VolumeMount   `json:"volumeMounts,omitempty"`
}

// The draft's names of the trainer's replicated Job and container, and Kiln's.
var draftNames = map[string]string{"trainer-node": trainer.NodeName, "trainer": trainer.NodeName}

// convertDraft maps the draft's fields to their v1alpha1 places: datasetConfig and
// modelConfig.input to the initializers, labels, annotations and podSpecOverrides to
// runtime patches, numProcPerNode to a number.
func convertDraft(doc []byte, c *conversion) (client.Object, error) {
	src, err := decode[draftSpec](doc, "TrainJob", c)
	if err != nil {
		return nil, err
	}
	tj := &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: objectMeta(src.Metadata),
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: c.runtime()}, Suspend: src.Spec.Suspend},
	}
	ref, refPath := src.Spec.RuntimeRef, "spec.runtimeRef"
	if ref == nil {
		ref, refPath = src.Spec.TrainingRuntimeRef, "spec.trainingRuntimeRef"
	}
	if ref != nil && ref.Name != "" && c.opts.Runtime == "" {
		tj.Spec.RuntimeRef.Name = ref.Name
		if k := ptr.Deref(ref.Kind, ""); k != "" && k != trainer.ClusterTrainingRuntimeKind {
			tj.Spec.RuntimeRef.Kind = ptr.To(k)
		}
		c.note(refPath, "runtime %s: it must exist as a trainer.kubeflow.org runtime (Kiln's catalog: torch-distributed, torch-distributed-spot, torch-distributed-rack, deepspeed-distributed, mpi-distributed, jax-distributed, xgboost-distributed)", ref.Name)
	}
	if t := src.Spec.Trainer; t != nil {
		tj.Spec.Trainer = &trainer.Trainer{Image: t.Image, Command: t.Command, Args: t.Args, NumNodes: t.NumNodes, ResourcesPerNode: t.ResourcesPerNode}
		tj.Spec.Trainer.Env = trainerEnv(t.Env, "spec.trainer", c)
		if p := ptr.Deref(t.NumProcPerNode, ""); p != "" && p != "auto" {
			if n, ok := positiveInt(p); ok {
				tj.Spec.Trainer.NumProcPerNode = ptr.To(n)
			} else {
				c.warn("spec.trainer.numProcPerNode", "%q: Kiln takes a number of processes per node, or none for one per GPU (else per CPU); left to the runtime", p)
			}
		}
	}
	if d := src.Spec.DatasetConfig; d != nil {
		tj.Spec.Initializer = &trainer.Initializer{Dataset: &trainer.DatasetInitializer{StorageUri: d.StorageUri, Env: d.Env, SecretRef: secretRef(d, tj.Namespace, "spec.datasetConfig", c)}}
	}
	if m := src.Spec.ModelConfig; m != nil {
		if m.Input != nil {
			if tj.Spec.Initializer == nil {
				tj.Spec.Initializer = &trainer.Initializer{}
			}
			tj.Spec.Initializer.Model = &trainer.ModelInitializer{StorageUri: m.Input.StorageUri, Env: m.Input.Env, SecretRef: secretRef(m.Input, tj.Namespace, "spec.modelConfig.input", c)}
		}
		if m.Output != nil {
			c.warn("spec.modelConfig.output", "the model exporter was dropped from the TrainJob API: export the model from the training code (to the checkpoint volume or a bucket)")
		}
	}
	initializersOnRuntime(tj, c)
	var patches []trainer.ReplicatedJobPatch
	for i, o := range src.Spec.PodSpecOverrides {
		patches = append(patches, overridePatches(o, fmt.Sprintf("spec.podSpecOverrides[%d]", i), c)...)
	}
	if len(patches) > 0 || len(src.Spec.Labels) > 0 || len(src.Spec.Annotations) > 0 {
		tpl := &trainer.JobSetTemplatePatch{}
		if len(src.Spec.Labels) > 0 || len(src.Spec.Annotations) > 0 {
			tpl.Metadata = &metav1.ObjectMeta{Labels: src.Spec.Labels, Annotations: src.Spec.Annotations}
			c.note("spec.labels", "spec.labels and spec.annotations went into a runtime patch of the JobSet's metadata (the TrainJob API has no such fields since v2.2)")
		}
		if len(patches) > 0 {
			tpl.Spec = &trainer.JobSetSpecPatch{ReplicatedJobs: patches}
		}
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: Manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: tpl}}}
	}
	if m := ptr.Deref(src.Spec.ManagedBy, ""); m == trainer.MultiKueueControllerName {
		tj.Spec.ManagedBy = ptr.To(m)
	} else if m != "" && m != "kubeflow.org/trainjob-controller" {
		c.warn("spec.managedBy", "%s: not a controller Kiln knows; the TrainJob is Kiln's", m)
	}
	return tj, nil
}

func secretRef(s *draftStorage, namespace, path string, c *conversion) *corev1.LocalObjectReference {
	if s.SecretRef == nil {
		return nil
	}
	if ns := s.SecretRef.Namespace; ns != "" && ns != namespace {
		c.warn(path+".secretRef.namespace", "%s: the secret must be in the TrainJob's namespace", s.SecretRef.Namespace)
	}
	return &corev1.LocalObjectReference{Name: s.SecretRef.Name}
}

// overridePatches turns one podSpecOverride into a patch of each replicated Job it targets.
func overridePatches(o draftPodOverride, path string, c *conversion) []trainer.ReplicatedJobPatch {
	targets := o.TargetReplicatedJobs
	for _, t := range o.TargetJobs {
		targets = append(targets, t.Name)
	}
	spec := &trainer.PodSpecPatch{ServiceAccountName: o.ServiceAccountName, NodeSelector: o.NodeSelector, Tolerations: o.Tolerations, Volumes: o.Volumes}
	containers := func(list []draftContainerOverride, field string) []trainer.ContainerPatch {
		var out []trainer.ContainerPatch
		for i, ct := range list {
			p := fmt.Sprintf("%s.%s[%d]", path, field, i)
			if len(ct.Command) > 0 || len(ct.Args) > 0 || len(ct.EnvFrom) > 0 {
				c.warn(p, "container %s: a runtime patch cannot change command, args or envFrom: set the trainer's in spec.trainer, or use a runtime of your own", ct.Name)
			}
			out = append(out, trainer.ContainerPatch{Name: renamed(ct.Name), Env: ct.Env, VolumeMounts: ct.VolumeMounts})
		}
		return out
	}
	spec.Containers = containers(o.Containers, "containers")
	spec.InitContainers = containers(o.InitContainers, "initContainers")
	var out []trainer.ReplicatedJobPatch
	for _, t := range targets {
		if n := renamed(t); n != t {
			c.note(path, "replicated Job %s is %s in trainer.kubeflow.org runtimes", t, n)
		}
		out = append(out, trainer.ReplicatedJobPatch{Name: renamed(t), Template: &trainer.JobTemplatePatch{
			Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: spec}},
		}})
	}
	if len(targets) == 0 {
		c.warn(path, "targets no replicated Job: not carried over")
	}
	return out
}

func renamed(name string) string {
	if n, ok := draftNames[strings.TrimSpace(name)]; ok {
		return n
	}
	return name
}

// initializersOnRuntime keeps the dataset and model initializers only where the runtime has
// their Jobs (when that is known): elsewhere the webhook would refuse the TrainJob, so their
// URIs go to the trainer's environment instead (DATASET_URI, MODEL_URI), for the training
// code to fetch.
func initializersOnRuntime(tj *trainer.TrainJob, c *conversion) {
	in := tj.Spec.Initializer
	if in == nil || c.opts.RuntimeJobs == nil || tj.Spec.RuntimeRef.Kind != nil {
		return
	}
	jobs, ok := c.opts.RuntimeJobs(tj.Spec.RuntimeRef.Name)
	if !ok {
		c.warn("spec.runtimeRef.name", "ClusterTrainingRuntime %s does not exist: create it, or convert with another runtime", tj.Spec.RuntimeRef.Name)
		return
	}
	move := func(job, field, env string, uri *string, secret *corev1.LocalObjectReference) bool {
		if slices.Contains(jobs, job) {
			return false
		}
		if tj.Spec.Trainer == nil {
			tj.Spec.Trainer = &trainer.Trainer{}
		}
		if uri != nil {
			tj.Spec.Trainer.Env = append(tj.Spec.Trainer.Env, corev1.EnvVar{Name: env, Value: *uri})
		}
		c.warn(field, "runtime %s has no %s job: the URI is the trainer's %s instead (fetch it in the training code, or convert with a runtime that has the job)", tj.Spec.RuntimeRef.Name, job, env)
		if secret != nil {
			c.warn(field+".secretRef", "secret %s is not carried over with it: give the trainer its credentials (a runtime patch's volume, or a runtime of your own)", secret.Name)
		}
		return true
	}
	if in.Dataset != nil && move(trainer.AncestorDatasetInitializer, "spec.datasetConfig", "DATASET_URI", in.Dataset.StorageUri, in.Dataset.SecretRef) {
		in.Dataset = nil
	}
	if in.Model != nil && move(trainer.AncestorModelInitializer, "spec.modelConfig.input", "MODEL_URI", in.Model.StorageUri, in.Model.SecretRef) {
		in.Model = nil
	}
	if in.Dataset == nil && in.Model == nil {
		tj.Spec.Initializer = nil
	}
}
