package view

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// StepKey identifies a step by its pod's labels: the replicated job, the Job's index in
// it, and the pod's completion index in the Job.
type StepKey struct {
	ReplicatedJob   string
	JobIndex, Index int
}

// StepKeyOf reads a JobSet pod's step, or false for a pod of no step.
func StepKeyOf(pod *corev1.Pod) (StepKey, bool) {
	rj := pod.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
	if rj == "" {
		return StepKey{}, false
	}
	jobIndex, _ := strconv.Atoi(pod.Labels[jobsetv1alpha2.JobIndexKey])
	index, _ := strconv.Atoi(pod.Labels[trainer.LabelJobCompletionIndex])
	return StepKey{ReplicatedJob: rj, JobIndex: jobIndex, Index: index}, true
}

// Name is "<replicated job>-<index>" (node-0), or "<replicated job>-<job>-<index>" for the
// replicated jobs that have several Jobs.
func (k StepKey) Name(multiJob bool) string {
	if multiJob {
		return fmt.Sprintf("%s-%d-%d", k.ReplicatedJob, k.JobIndex, k.Index)
	}
	return fmt.Sprintf("%s-%d", k.ReplicatedJob, k.Index)
}

// Steps groups a job's pods into steps: the newest pod of each, with the older ones
// counted as restarts. Steps are ordered initializers first, then launcher, then nodes, by
// index.
func Steps(pods []corev1.Pod) []*kilnv1.Step {
	type group struct {
		key    StepKey
		newest *corev1.Pod
		older  int
	}
	groups := map[StepKey]*group{}
	multiJob := map[string]bool{}
	for i := range pods {
		pod := &pods[i]
		key, ok := StepKeyOf(pod)
		if !ok {
			continue
		}
		if key.JobIndex > 0 {
			multiJob[key.ReplicatedJob] = true
		}
		g := groups[key]
		switch {
		case g == nil:
			groups[key] = &group{key: key, newest: pod}
		case g.newest.CreationTimestamp.Before(&pod.CreationTimestamp):
			g.newest, g.older = pod, g.older+1
		default:
			g.older++
		}
	}
	steps := make([]*kilnv1.Step, 0, len(groups))
	keys := make([]StepKey, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, CompareSteps)
	for _, k := range keys {
		g := groups[k]
		step := stepOf(g.newest)
		step.Name = k.Name(multiJob[k.ReplicatedJob])
		step.ReplicatedJob = k.ReplicatedJob
		step.Index = int32(k.Index)
		step.Restarts += int32(g.older)
		step.KubeflowName = k.kubeflowName(step.Name, multiJob[k.ReplicatedJob], groups[StepKey{ReplicatedJob: trainer.LauncherName}] != nil)
		steps = append(steps, step)
	}
	return steps
}

// kubeflowName is the step's name in the Kubeflow SDK's words (name, else): an initializer is
// its replicated job, and with an MPI launcher (launched) the launcher is node-0 and each
// node one index up.
func (k StepKey) kubeflowName(name string, multiJob, launched bool) string {
	switch {
	case multiJob:
		return name
	case (k.ReplicatedJob == trainer.AncestorDatasetInitializer || k.ReplicatedJob == trainer.AncestorModelInitializer) && k.Index == 0:
		return k.ReplicatedJob
	case k.ReplicatedJob == trainer.LauncherName && k.Index == 0:
		return trainer.NodeName + "-0"
	case k.ReplicatedJob == trainer.NodeName && launched:
		return fmt.Sprintf("%s-%d", trainer.NodeName, k.Index+1)
	}
	return name
}

// CompareSteps orders steps as they are shown: initializers, launcher, nodes, by index.
func CompareSteps(a, b StepKey) int {
	return cmp.Or(cmp.Compare(stepOrder(a.ReplicatedJob), stepOrder(b.ReplicatedJob)), strings.Compare(a.ReplicatedJob, b.ReplicatedJob),
		cmp.Compare(a.JobIndex, b.JobIndex), cmp.Compare(a.Index, b.Index))
}

func stepOrder(rj string) int {
	switch rj {
	case trainer.AncestorDatasetInitializer:
		return 0
	case trainer.AncestorModelInitializer:
		return 1
	case trainer.LauncherName:
		return 2
	case trainer.NodeName:
		return 3
	}
	return 4
}

func stepOf(pod *corev1.Pod) *kilnv1.Step {
	phase := string(pod.Status.Phase)
	if phase == "" {
		phase = string(corev1.PodPending)
	}
	step := &kilnv1.Step{Pod: pod.Name, Phase: phase, Node: pod.Spec.NodeName, Reason: pod.Status.Reason, Message: pod.Status.Message}
	if pod.Status.StartTime != nil {
		step.StartTime = timestamppb.New(pod.Status.StartTime.Time)
	}
	main := trainer.MainContainer(pod)
	for _, c := range pod.Spec.Containers {
		if c.Name != main {
			continue
		}
		step.Devices = devicesOf(c.Resources)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		step.Restarts += cs.RestartCount
		if cs.Name != main {
			continue
		}
		switch {
		case cs.State.Terminated != nil:
			step.ExitCode = &cs.State.Terminated.ExitCode
			if step.Reason == "" {
				step.Reason, step.Message = cs.State.Terminated.Reason, cs.State.Terminated.Message
			}
		case cs.State.Waiting != nil && step.Reason == "":
			step.Reason, step.Message = cs.State.Waiting.Reason, cs.State.Waiting.Message
		}
	}
	if step.Reason == "" && pod.Status.Phase == corev1.PodPending {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				step.Reason, step.Message = c.Reason, c.Message
			}
		}
	}
	return step
}

// devicesOf lists the extended resources (accelerators) a container is given: those with
// a domain-prefixed name, such as nvidia.com/gpu.
func devicesOf(res corev1.ResourceRequirements) []*kilnv1.Device {
	list := res.Limits
	if len(list) == 0 {
		list = res.Requests
	}
	var out []*kilnv1.Device
	for name, q := range list {
		if !isDevice(name) {
			continue
		}
		out = append(out, &kilnv1.Device{Resource: string(name), Count: q.Value()})
	}
	slices.SortFunc(out, func(a, b *kilnv1.Device) int { return strings.Compare(a.Resource, b.Resource) })
	return out
}

func isDevice(name corev1.ResourceName) bool {
	return strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) &&
		!strings.HasPrefix(string(name), "kubernetes.io/")
}

// Quantities renders a resource list as strings.
func Quantities(list corev1.ResourceList) map[string]string {
	if len(list) == 0 {
		return nil
	}
	out := make(map[string]string, len(list))
	for k, v := range list {
		out[string(k)] = v.String()
	}
	return out
}
