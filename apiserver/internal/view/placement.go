package view

import (
	"fmt"
	"strings"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Placement is where Kueue's topology-aware scheduling put the pod sets of a workload:
// topology names the Topology of their flavor, levels its levels; nodeLabels gives a
// node's labels by name (Kueue assigns hostnames only, when they are the lowest level).
// Nil when no pod set was placed on a topology.
func Placement(topology string, levels []kueue.Level, podSets []PodSet, nodeLabels func(string) map[string]string) *kilnv1.Placement {
	var out *kilnv1.Placement
	for _, ps := range podSets {
		if ps.Assignment == nil {
			continue
		}
		if out == nil {
			out = &kilnv1.Placement{Topology: topology}
			for _, l := range levels {
				out.Levels = append(out.Levels, &kilnv1.TopologyLevel{Name: l.Name, NodeLabel: l.NodeLabel})
			}
		}
		p := &kilnv1.PodSetPlacement{Name: ps.Name, Count: ps.Count, Flavor: ps.Flavor}
		if ps.Required != "" {
			p.RequiredLevel = kueue.LevelName(levels, ps.Required)
		}
		if ps.Preferred != "" {
			p.PreferredLevel = kueue.LevelName(levels, ps.Preferred)
		}
		domains, err := kueue.Domains(ps.Assignment)
		if err == nil {
			for _, d := range kueue.PlaceDomains(levels, ps.Assignment.Levels, domains, nodeLabels) {
				p.Domains = append(p.Domains, &kilnv1.TopologyDomain{Values: d.Values, Pods: d.Pods})
			}
		}
		out.PodSets = append(out.PodSets, p)
	}
	return out
}

// waitingMessage is why Kueue has not admitted wl: its own words, said in the job's terms
// first when a pod set asks for one domain of a topology level and Kueue's reason is the
// topology ("no rack has room for all 5 pods of node").
func (w *Workload) waitingMessage() string {
	for _, ps := range w.PodSets {
		// Kueue says "couldn't assign flavors to pod set NAME: REASON", joined by "; ".
		_, reason, found := strings.Cut(w.PendingMessage, "pod set "+ps.Name+": ")
		reason, _, _ = strings.Cut(reason, "; ")
		if ps.Required == "" || !found || !strings.Contains(reason, "topology") {
			continue
		}
		level := kueue.LevelName(w.Levels, ps.Required)
		return fmt.Sprintf("no %s has room for all %d pods of %s (it requires one %s, node label %s); Kueue: %s",
			level, ps.Count, ps.Name, level, ps.Required, w.PendingMessage)
	}
	return w.PendingMessage
}

// TopologyOf is the topology the job asks for through its runtime patches (Kueue's pod set
// annotations on a replicated job's pod template; the last patch that sets one wins), its
// level named among levels where known; nil when it asks for none.
func TopologyOf(tj *trainer.TrainJob, levels []kueue.Level) *kilnv1.TopologyRequest {
	var out *kilnv1.TopologyRequest
	for _, p := range tj.Spec.RuntimePatches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil || p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		for _, rj := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			if rj.Template == nil || rj.Template.Spec == nil || rj.Template.Spec.Template == nil || rj.Template.Spec.Template.Metadata == nil {
				continue
			}
			if t := PodTopology(rj.Template.Spec.Template.Metadata.Annotations, levels); t != nil {
				out = t
			}
		}
	}
	return out
}

// PodTopology is the topology a pod template's annotations a ask Kueue for, nil for none.
func PodTopology(a map[string]string, levels []kueue.Level) *kilnv1.TopologyRequest {
	if label := a[kueue.AnnotationRequiredTopology]; label != "" {
		return &kilnv1.TopologyRequest{Level: kueue.LevelName(levels, label), NodeLabel: label}
	}
	if label := a[kueue.AnnotationPreferredTopology]; label != "" {
		return &kilnv1.TopologyRequest{Level: kueue.LevelName(levels, label), NodeLabel: label, Preferred: true}
	}
	return nil
}
