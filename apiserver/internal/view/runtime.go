package view

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Runtime is the API's view of a TrainingRuntime or ClusterTrainingRuntime.
func Runtime(meta *metav1.ObjectMeta, kind string, spec *trainer.TrainingRuntimeSpec) *kilnv1.Runtime {
	rt := &kilnv1.Runtime{
		Name:       meta.Name,
		Namespace:  meta.Namespace,
		Kind:       runtimeKindOf(kind),
		Framework:  meta.Labels[trainer.LabelFramework],
		Deprecated: meta.Labels[trainer.LabelSupport] == "deprecated",
		Labels:     meta.Labels,
		CreateTime: timestamp(&meta.CreationTimestamp),
	}
	if mp := spec.MLPolicy; mp != nil {
		rt.Nodes = ptr.Deref(mp.NumNodes, 0)
		if mp.MPI != nil {
			rt.ProcsPerNode = ptr.Deref(mp.MPI.NumProcPerNode, 0)
		}
	}
	if rp := spec.RunPolicy; rp != nil {
		rt.RunPolicy = &kilnv1.RunPolicy{ActiveDeadlineSeconds: rp.ActiveDeadlineSeconds, TtlSecondsAfterFinished: rp.TTLSecondsAfterFinished}
	}
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		rt.Steps = append(rt.Steps, rj.Name)
		if rj.Template.Labels[trainer.LabelTrainJobAncestor] != trainer.AncestorTrainer && rj.Name != trainer.NodeName {
			continue
		}
		if t := PodTopology(rj.Template.Spec.Template.Annotations, nil); t != nil && rt.Topology == nil {
			rt.Topology = t
		}
		if c := trainerContainer(rj.Template.Spec.Template.Spec.Containers); c != nil && rt.Image == "" {
			rt.Image = c.Image
			rt.DevicesPerNode = devicesOf(c.Resources)
			if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
				rt.ResourcesPerNode = &kilnv1.Resources{Requests: Quantities(c.Resources.Requests), Limits: Quantities(c.Resources.Limits)}
			}
		}
	}
	return rt
}

// trainerContainer is the container named "node", else the first.
func trainerContainer(cs []corev1.Container) *corev1.Container {
	for i := range cs {
		if cs[i].Name == trainer.NodeName {
			return &cs[i]
		}
	}
	if len(cs) > 0 {
		return &cs[0]
	}
	return nil
}
