package migrate

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// The spec of the Training Operator v1 PyTorchJob (kubeflow.org/v1), as much of it as a
// conversion reads: its JSON names, from the operator's release-1.9 API.
type pyTorchJobSpec struct {
	RunPolicy           *runPolicy              `json:"runPolicy,omitempty"`
	ElasticPolicy       map[string]any          `json:"elasticPolicy,omitempty"`
	PyTorchReplicaSpecs map[string]*replicaSpec `json:"pytorchReplicaSpecs"`
	NprocPerNode        *string                 `json:"nprocPerNode,omitempty"`
}

type replicaSpec struct {
	Replicas      *int32                 `json:"replicas,omitempty"`
	Template      corev1.PodTemplateSpec `json:"template"`
	RestartPolicy string                 `json:"restartPolicy,omitempty"`
}

type runPolicy struct {
	CleanPodPolicy          *string           `json:"cleanPodPolicy,omitempty"`
	TTLSecondsAfterFinished *int32            `json:"ttlSecondsAfterFinished,omitempty"`
	ActiveDeadlineSeconds   *int64            `json:"activeDeadlineSeconds,omitempty"`
	BackoffLimit            *int32            `json:"backoffLimit,omitempty"`
	SchedulingPolicy        *schedulingPolicy `json:"schedulingPolicy,omitempty"`
	Suspend                 *bool             `json:"suspend,omitempty"`
	ManagedBy               *string           `json:"managedBy,omitempty"`
}

type schedulingPolicy struct {
	MinAvailable           *int32         `json:"minAvailable,omitempty"`
	Queue                  string         `json:"queue,omitempty"`
	MinResources           map[string]any `json:"minResources,omitempty"`
	PriorityClass          string         `json:"priorityClass,omitempty"`
	ScheduleTimeoutSeconds *int32         `json:"scheduleTimeoutSeconds,omitempty"`
}

// The v1 operator's names.
const (
	v1Container = "pytorch"
	v1PortName  = "pytorchjob-port"
)

// Kiln's torch runtime's: the trainer's replicated Job and container, and where its
// rendezvous master listens (node 0 of the TrainJob's headless Service).
const (
	nodeJob       = trainer.NodeName
	nodeContainer = trainer.NodeName
	masterPort    = "29500"
)

// jobCompletionIndex is where a node's index (0..numNodes-1) is read from, as Kiln's
// PET_NODE_RANK is.
const jobCompletionIndex = "metadata.annotations['batch.kubernetes.io/job-completion-index']"

// reservedEnv are the torchrun variables Kiln's runtime sets; a TrainJob may not set them.
var reservedEnv = []string{"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}

// v1Env are the variables the v1 operator set on every container (compatEnv sets them again).
var v1Env = []string{"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PYTHONUNBUFFERED"}

// convertPyTorchJob: Master + Workers become numNodes nodes of one template, node 0 in the
// Master's place; torchrun's flags that Kiln sets go; the variables the v1 operator set are
// set to the same meaning; the pod's scheduling and volumes go into a runtime patch.
func convertPyTorchJob(doc []byte, c *conversion) (client.Object, error) {
	src, err := decode[pyTorchJobSpec](doc, "PyTorchJob", c)
	if err != nil {
		return nil, err
	}
	var master, worker *replicaSpec
	for _, k := range slices.Sorted(maps.Keys(src.Spec.PyTorchReplicaSpecs)) {
		switch strings.ToLower(k) {
		case "master":
			master = src.Spec.PyTorchReplicaSpecs[k]
		case "worker":
			worker = src.Spec.PyTorchReplicaSpecs[k]
		default:
			return nil, fmt.Errorf("spec.pytorchReplicaSpecs.%s: a PyTorchJob has Master and Worker replicas only", k)
		}
	}
	if master == nil && worker == nil {
		return nil, fmt.Errorf("spec.pytorchReplicaSpecs: no Master and no Worker: nothing to run")
	}
	masters, workers := replicasOf(master), replicasOf(worker)
	if master != nil && masters != 1 {
		return nil, fmt.Errorf("spec.pytorchReplicaSpecs.Master.replicas: %d; a PyTorchJob has one Master", masters)
	}
	nodes := masters + workers
	// Node 0 takes the Master's place (rank 0); every node runs one template: the Master's.
	primary, primaryPath := master, "spec.pytorchReplicaSpecs.Master"
	if primary == nil {
		primary, primaryPath = worker, "spec.pytorchReplicaSpecs.Worker"
	}
	tj := &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: objectMeta(src.Metadata),
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: c.runtime()}},
	}
	fp, err := fromPod(primary.Template, primaryPath+".template", v1Container, c)
	if err != nil {
		return nil, err
	}
	t := fp.trainer
	t.NumNodes = ptr.To(nodes)
	tj.Spec.Trainer = t
	if fp.patch != nil {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{*fp.patch}
	}
	// Processes per node: the job's nprocPerNode, else torchrun's flag; "auto" (and the GPU
	// count it means) is Kiln's default too.
	nproc := ptr.Deref(src.Spec.NprocPerNode, "")
	nprocPath := "spec.nprocPerNode"
	if nproc == "" && fp.launch.nprocPerNode != "" {
		nproc, nprocPath = fp.launch.nprocPerNode, fp.ctPath+".command"
	}
	t.NumProcPerNode = nil
	if n, ok := positiveInt(nproc); ok {
		t.NumProcPerNode = ptr.To(n)
	} else if nproc != "" && nproc != "auto" && nproc != "gpu" {
		c.warn(nprocPath, "%q: Kiln takes a number of processes per node, or none for one per GPU (else per CPU); left to the runtime", nproc)
	}
	// WORLD_SIZE as v1 computed it: nodes times spec.nprocPerNode when that is a number, else
	// times 1 (torchrun sets the workers' own WORLD_SIZE either way).
	worldSize := nodes
	if n, ok := positiveInt(ptr.Deref(src.Spec.NprocPerNode, "")); ok {
		worldSize = nodes * n
	}
	if master != nil {
		// v1 set these only when the job had a Master.
		t.Env = append(t.Env, compatEnv(tj.Name, worldSize)...)
		c.note(fp.ctPath+".env", "set MASTER_ADDR, MASTER_PORT (%s, Kiln's), RANK (0 on the node in the Master's place, then 1..%d) and WORLD_SIZE (%d) as the v1 operator did, for code that reads them",
			masterPort, nodes-1, worldSize)
	}
	for _, p := range fp.container.Ports {
		if p.Name == v1PortName || p.ContainerPort == 23456 {
			c.note(fp.ctPath+".ports", "the rendezvous port is Kiln's %s, not %d", masterPort, p.ContainerPort)
		}
	}
	if master != nil && worker != nil {
		compareTemplates(master.Template, worker.Template, c)
	}
	for _, rs := range []struct {
		name string
		r    *replicaSpec
	}{{"Master", master}, {"Worker", worker}} {
		if name, r := rs.name, rs.r; r != nil {
			restartPolicy(r.RestartPolicy, "spec.pytorchReplicaSpecs."+name+".restartPolicy", "v1", c)
		}
	}
	applyRunPolicy(src.Spec.RunPolicy, tj, c)
	if len(src.Spec.ElasticPolicy) > 0 {
		c.warn("spec.elasticPolicy", "Kiln does not resize jobs (docs/fault-tolerance.md: elastic training): the job runs on a fixed %d nodes, and the runtime's failurePolicy restarts the whole group", nodes)
	}
	return tj, nil
}

func replicasOf(r *replicaSpec) int32 {
	if r == nil {
		return 0
	}
	return ptr.Deref(r.Replicas, 1)
}

// compatEnv sets what the v1 operator set on every pod, with the same meaning on Kiln:
// MASTER_ADDR and MASTER_PORT of node 0 (Kiln's rendezvous master), RANK the node's index
// (the Master's 0, worker i's i+1: Kiln's node i+1), and WORLD_SIZE nodes times processes
// per node (as v1 computed it: times 1 unless nprocPerNode was a number).
func compatEnv(name string, worldSize int32) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "MASTER_ADDR", Value: fmt.Sprintf("%s-%s-0-0.%s", name, nodeJob, name)},
		{Name: "MASTER_PORT", Value: masterPort},
		{Name: "RANK", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: jobCompletionIndex}}},
		{Name: "WORLD_SIZE", Value: strconv.Itoa(int(worldSize))},
		{Name: "PYTHONUNBUFFERED", Value: "1"},
	}
}

// compareTemplates warns where the Workers' pods differ from the Master's: Kiln runs every
// node from one template, the Master's.
func compareTemplates(m, w corev1.PodTemplateSpec, c *conversion) {
	mc, wc := m.DeepCopy(), w.DeepCopy()
	// What v1 itself made differ, or that converts to the same: not a difference.
	for _, t := range []*corev1.PodTemplateSpec{mc, wc} {
		t.Spec.RestartPolicy = ""
		for i := range t.Spec.Containers {
			t.Spec.Containers[i].Ports = nil
		}
	}
	if apiequality.Semantic.DeepEqual(mc, wc) {
		return
	}
	var diff []string
	if !apiequality.Semantic.DeepEqual(mc.ObjectMeta, wc.ObjectMeta) {
		diff = append(diff, "metadata")
	}
	if len(mc.Spec.Containers) != len(wc.Spec.Containers) {
		diff = append(diff, "spec.containers")
	} else {
		for i := range mc.Spec.Containers {
			if !apiequality.Semantic.DeepEqual(mc.Spec.Containers[i], wc.Spec.Containers[i]) {
				diff = append(diff, fmt.Sprintf("spec.containers[%d]", i))
			}
		}
	}
	ms, ws := mc.Spec, wc.Spec
	ms.Containers, ws.Containers = nil, nil
	if !apiequality.Semantic.DeepEqual(ms, ws) {
		diff = append(diff, "spec (scheduling, volumes)")
	}
	c.warn("spec.pytorchReplicaSpecs.Worker.template", "differs from the Master's (%s): every Kiln node runs the Master's template", strings.Join(diff, ", "))
}

// restartPolicy explains what a replica's restartPolicy becomes.
func restartPolicy(p, field, who string, c *conversion) {
	switch p {
	case "", "OnFailure", "Always":
		c.note(field, "%s: %s restarted a failed container in place; on Kiln the runtime's failurePolicy restarts the whole group (torch-distributed-spot: a preemption does not count, a crash does, up to maxRestarts)", cmp.Or(p, "OnFailure (the default)"), who)
	case "ExitCode":
		c.note(field, "ExitCode: v1 retried exit codes 128 and over; on Kiln the runtime's podFailurePolicy decides (torch-distributed-spot: exit 75 and evictions restart without counting, 78 fails at once)")
	case "Never":
	default:
		c.warn(field, "%q: not a restart policy of v1 (Always, OnFailure, Never, ExitCode)", p)
	}
}

// applyRunPolicy carries the v1 run policy: deadline, TTL, suspend and the Kueue queue map
// to the TrainJob; the rest is explained.
func applyRunPolicy(rp *runPolicy, tj *trainer.TrainJob, c *conversion) {
	if rp == nil {
		return
	}
	tj.Spec.ActiveDeadlineSeconds = rp.ActiveDeadlineSeconds
	tj.Spec.TTLSecondsAfterFinished = rp.TTLSecondsAfterFinished
	if ptr.Deref(rp.Suspend, false) {
		tj.Spec.Suspend = ptr.To(true)
	}
	if rp.ActiveDeadlineSeconds != nil {
		c.note("spec.runPolicy.activeDeadlineSeconds", "counts from each admission or resume on Kiln, not from the first start (docs/lifecycle.md)")
	}
	if rp.BackoffLimit != nil {
		c.warn("spec.runPolicy.backoffLimit", "%d: Kiln restarts the whole group up to its runtime's failurePolicy.maxRestarts (torch-distributed-spot: 3) instead; choose the runtime for it", *rp.BackoffLimit)
	}
	switch p := ptr.Deref(rp.CleanPodPolicy, ""); p {
	case "", "None":
	default:
		c.warn("spec.runPolicy.cleanPodPolicy", "%s: Kiln keeps a finished job's pods (and logs) until its ttlSecondsAfterFinished deletes the job", p)
	}
	if m := ptr.Deref(rp.ManagedBy, ""); m != "" && m != "kubeflow.org/training-operator" {
		c.warn("spec.runPolicy.managedBy", "%s: set spec.managedBy yourself if another controller (MultiKueue) should run the TrainJob", m)
	}
	if sp := rp.SchedulingPolicy; sp != nil {
		if sp.Queue != "" {
			if tj.Labels == nil {
				tj.Labels = map[string]string{}
			}
			tj.Labels[trainer.KueueQueueNameLabel] = sp.Queue
			c.note("spec.runPolicy.schedulingPolicy.queue", "became the label %s=%s: Kueue admits the whole job at once (all nodes or none)", trainer.KueueQueueNameLabel, sp.Queue)
		}
		if sp.PriorityClass != "" {
			c.warn("spec.runPolicy.schedulingPolicy.priorityClass", "%s: with Kueue, set a WorkloadPriorityClass with the label %s", sp.PriorityClass, trainer.KueuePriorityClassLabel)
		}
		if sp.MinAvailable != nil || len(sp.MinResources) > 0 || sp.ScheduleTimeoutSeconds != nil {
			c.warn("spec.runPolicy.schedulingPolicy", "minAvailable, minResources and scheduleTimeoutSeconds (gang scheduling): Kueue's admission starts every node or none")
		}
	}
}
