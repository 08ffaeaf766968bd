package service

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/request"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

// Topology-aware placement: a job asks for one domain of a level of its queue's Kueue
// Topology ("rack"), which the server resolves to the level's node label and writes as
// Kueue's pod set annotation, through a runtime patch, on the runtime's trainer job; and
// the views say where Kueue placed a job, naming the levels.

// flavorTopology is the Topology of ResourceFlavor flavor: its name and levels, "" when the
// flavor has none (or is unknown).
func flavorTopology(ctx context.Context, k *kube.Clients, flavor string) (string, []kueue.Level) {
	u := kube.New(kube.FlavorGVK)
	if err := k.Cache.Get(ctx, client.ObjectKey{Name: flavor}, u); err != nil {
		return "", nil
	}
	rf, err := kueue.ResourceFlavor(u)
	if err != nil || rf.Spec.TopologyName == nil {
		return "", nil
	}
	name := string(*rf.Spec.TopologyName)
	tu := kube.New(kube.TopologyGVK)
	if err := k.Cache.Get(ctx, client.ObjectKey{Name: name}, tu); err != nil {
		return name, nil
	}
	topo, err := kueue.Topology(tu)
	if err != nil {
		return name, nil
	}
	return name, kueue.Levels(topo)
}

// queueTopology is the Topology of the first flavor with one of the ClusterQueue behind
// LocalQueue namespace/localQueue, with the flavors it looked at; "" when none has one.
func queueTopology(ctx context.Context, k *kube.Clients, namespace, localQueue string) (clusterQueue, flavor, topology string, levels []kueue.Level, err error) {
	lqu := kube.New(kube.LocalQueueGVK)
	if err := k.Cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: localQueue}, lqu); err != nil {
		return "", "", "", nil, fmt.Errorf("reading LocalQueue %s/%s: %w", namespace, localQueue, err)
	}
	lq, err := kueue.LocalQueue(lqu)
	if err != nil {
		return "", "", "", nil, err
	}
	clusterQueue = string(lq.Spec.ClusterQueue)
	cqu := kube.New(kube.ClusterQueueGVK)
	if err := k.Cache.Get(ctx, client.ObjectKey{Name: clusterQueue}, cqu); err != nil {
		return clusterQueue, "", "", nil, fmt.Errorf("reading ClusterQueue %s: %w", clusterQueue, err)
	}
	cq, err := kueue.ClusterQueue(cqu)
	if err != nil {
		return clusterQueue, "", "", nil, err
	}
	for _, rg := range cq.Spec.ResourceGroups {
		for _, f := range rg.Flavors {
			if name, levels := flavorTopology(ctx, k, string(f.Name)); name != "" {
				return clusterQueue, string(f.Name), name, levels, nil
			}
		}
	}
	return clusterQueue, "", "", nil, nil
}

// nodeLabels reads nodes' labels from the cache, by name.
func nodeLabels(ctx context.Context, k *kube.Clients) func(string) map[string]string {
	return func(name string) map[string]string {
		n := kube.NodeMeta()
		if err := k.Cache.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return nil
		}
		return n.Labels
	}
}

// placement fills what the view of a job says of its topology: the levels' names in its
// spec's topology and its Workload's waiting message, and where its pods were placed.
func (v *views) placement(ctx context.Context, tj *trainer.TrainJob, rel *view.Related) {
	wl := rel.Workload
	asks := view.TopologyOf(tj, nil) != nil
	// Without Kueue's API nothing places by topology (and its kinds are not cached).
	if !v.kube.Kueue() || (!asks && (wl == nil || len(wl.PodSets) == 0)) {
		return
	}
	var topology string
	var levels []kueue.Level
	if wl != nil {
		for _, ps := range wl.PodSets {
			if ps.Flavor != "" {
				topology, levels = flavorTopology(ctx, v.kube, strings.Split(ps.Flavor, ",")[0])
				break
			}
		}
	}
	if topology == "" {
		queue := tj.Labels[trainer.KueueQueueNameLabel]
		_, _, topology, levels, _ = queueTopology(ctx, v.kube, tj.Namespace, queue)
	}
	rel.Levels = levels
	if wl != nil {
		wl.Levels = levels
		rel.Placement = view.Placement(topology, levels, wl.PodSets, nodeLabels(ctx, v.kube))
	}
}

// TopologyManager is the manager of the runtime patch that asks for a topology.
const TopologyManager = "kiln.dev/topology"

// askTopology resolves the topology a structured create request asks for (at path) against
// the Topology of the job's queue, and patches the runtime's trainer job with Kueue's pod
// set annotation. The queue is the job's, else the namespace's LocalQueue "default" (Kueue's
// default queue).
func askTopology(ctx context.Context, k *kube.Clients, tj *trainer.TrainJob, t *kilnv1.TopologyRequest, path *field.Path) field.ErrorList {
	if t.GetLevel() == "" {
		if t.GetPreferred() {
			return field.ErrorList{field.Required(path.Child("level"), "name the level to prefer, e.g. rack")}
		}
		return nil
	}
	lp := path.Child("level")
	if !k.Kueue() {
		return field.ErrorList{field.Invalid(lp, t.GetLevel(), "topology-aware placement is Kueue's, and Kueue is not installed: leave topology unset")}
	}
	queue := tj.Labels[trainer.KueueQueueNameLabel]
	if queue == "" {
		if err := k.Cache.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: "default"}, kube.New(kube.LocalQueueGVK)); err != nil {
			return field.ErrorList{field.Invalid(lp, t.GetLevel(), "a topology is placed by the job's Kueue queue, and the job names none (nor has its namespace a LocalQueue \"default\"): set queue to one on a topology-aware flavor (`kiln queues list`)")}
		}
		queue = "default"
	}
	cq, _, topology, levels, err := queueTopology(ctx, k, tj.Namespace, queue)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(lp, t.GetLevel(), fmt.Sprintf("cannot read the topology of queue %s: %v", queue, err))}
	case topology == "":
		return field.ErrorList{field.Invalid(lp, t.GetLevel(), fmt.Sprintf("queue %s (ClusterQueue %s) has no flavor with a Kueue Topology, so nothing places its jobs by topology: name a topology-aware queue, or leave topology unset", queue, cq))}
	case levels == nil:
		return field.ErrorList{field.Invalid(lp, t.GetLevel(), fmt.Sprintf("queue %s places on Kueue Topology %q, which does not exist: ask an admin to create it", queue, topology))}
	}
	level, err := kueue.ResolveLevel(levels, t.GetLevel())
	if err != nil {
		return field.ErrorList{field.Invalid(lp, t.GetLevel(), fmt.Sprintf("queue %s places on Kueue Topology %q, which has %v: name one of them", queue, topology, err))}
	}
	job, annotations := trainerJob(ctx, k, tj)
	// Kueue refuses a pod set with two kinds of topology annotation, and a patch can only
	// add to the runtime's: the job may change the runtime's level, not its kind.
	if rt := view.PodTopology(annotations, levels); rt != nil && rt.GetPreferred() != t.GetPreferred() {
		kind, want, flag := "requires", "required", "leave out --topology-preferred (SDK: topology_preferred)"
		if rt.GetPreferred() {
			kind, want, flag = "prefers", "preferred", "add --topology-preferred (SDK: topology_preferred=True)"
		}
		return field.ErrorList{field.Invalid(path.Child("preferred"), t.GetPreferred(), fmt.Sprintf(
			"runtime %s already %s one %s (Kueue's annotation on its %s pods), and Kueue refuses pods that both require and prefer a topology: ask for a %s level (%s), or pick a runtime that asks for none",
			tj.Spec.RuntimeRef.Name, kind, rt.GetLevel(), job, want, flag))}
	}
	tj.Spec.RuntimePatches = append(tj.Spec.RuntimePatches, request.TopologyPatch(TopologyManager, job, level.NodeLabel, t.GetPreferred()))
	return nil
}

// trainerJob names the replicated job of the job's runtime that runs the training nodes
// (labelled as the trainer's ancestor step), with its pods' annotations; "node" when the
// runtime cannot be read.
func trainerJob(ctx context.Context, k *kube.Clients, tj *trainer.TrainJob) (string, map[string]string) {
	var spec *trainer.TrainingRuntimeSpec
	switch ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind) {
	case trainer.ClusterTrainingRuntimeKind:
		rt := &trainer.ClusterTrainingRuntime{}
		if k.Cache.Get(ctx, client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, rt) == nil {
			spec = &rt.Spec
		}
	case trainer.TrainingRuntimeKind:
		rt := &trainer.TrainingRuntime{}
		if k.Cache.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}, rt) == nil {
			spec = &rt.Spec
		}
	}
	if spec != nil {
		for _, rj := range spec.Template.Spec.ReplicatedJobs {
			if rj.Template.Labels[trainer.LabelTrainJobAncestor] == trainer.AncestorTrainer {
				return rj.Name, rj.Template.Spec.Template.Annotations
			}
		}
	}
	return trainer.NodeName, nil
}
