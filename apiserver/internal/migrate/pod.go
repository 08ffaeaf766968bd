package migrate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// fromPodResult is what a source's pod template becomes: the TrainJob's trainer and a
// runtime patch of the trainer's pods.
type fromPodResult struct {
	trainer *trainer.Trainer
	patch   *trainer.RuntimePatch
	// container is the source's trainer container, ctPath its path.
	container corev1.Container
	ctPath    string
	launch    launch
}

// fromPod converts a pod template: its trainer container (the one named preferred, else
// the first) into the TrainJob's trainer, without torchrun's flags that Kiln sets; its
// scheduling, identity and volumes into a runtime patch; the rest into warnings.
func fromPod(tpl corev1.PodTemplateSpec, tplPath, preferred string, c *conversion) (*fromPodResult, error) {
	pod := tpl.Spec
	ci := slices.IndexFunc(pod.Containers, func(ct corev1.Container) bool { return ct.Name == preferred })
	if ci < 0 {
		if len(pod.Containers) == 0 {
			return nil, fmt.Errorf("%s.spec.containers: no container to run", tplPath)
		}
		ci = 0
	}
	ct := pod.Containers[ci]
	r := &fromPodResult{trainer: &trainer.Trainer{}, container: ct, ctPath: fmt.Sprintf("%s.spec.containers[%d]", tplPath, ci)}
	t := r.trainer
	if ct.Image != "" {
		t.Image = ptr.To(ct.Image)
	}
	t.Command, t.Args, r.launch = stripTorchrunFlags(ct.Command, ct.Args)
	if len(r.launch.removed) > 0 {
		c.note(r.ctPath+".command", "removed the torchrun flags %s: Kiln's runtime sets them (PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT, PET_NPROC_PER_NODE)", strings.Join(r.launch.removed, ", "))
	}
	if !r.launch.found && runsShell(append(slices.Clone(ct.Command), ct.Args...)) {
		c.warn(r.ctPath+".command", "runs a shell script: check it for torchrun flags Kiln's runtime sets (--nnodes, --node_rank, --master_addr, --master_port, --nproc_per_node) and remove them")
	}
	if n, ok := positiveInt(r.launch.nprocPerNode); ok {
		t.NumProcPerNode = ptr.To(n)
	}
	if res := ct.Resources; len(res.Limits) > 0 || len(res.Requests) > 0 {
		t.ResourcesPerNode = res.DeepCopy()
	}
	t.Env = trainerEnv(ct.Env, r.ctPath, c)
	uncarriedContainerFields(ct, r.ctPath, c)
	r.patch = podPatch(tpl, ci, tplPath, c)
	return r, nil
}

// objectMeta keeps what a user wrote of the source's metadata: name, namespace, labels and
// annotations (not what kubectl or the apiserver added).
func objectMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels}
	for k, v := range m.Annotations {
		if k == corev1.LastAppliedConfigAnnotation {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	return out
}

// trainerEnv keeps the container's variables but those Kiln's runtime or compatEnv sets.
func trainerEnv(env []corev1.EnvVar, ctPath string, c *conversion) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i, e := range env {
		switch {
		case slices.Contains(reservedEnv, e.Name):
			c.warn(fmt.Sprintf("%s.env[%d]", ctPath, i), "%s: Kiln's runtime sets it; a TrainJob may not", e.Name)
		case slices.Contains(v1Env, e.Name):
			c.warn(fmt.Sprintf("%s.env[%d]", ctPath, i), "%s: set to Kiln's value instead (the v1 operator set it too)", e.Name)
		default:
			out = append(out, e)
		}
	}
	return out
}

// uncarriedContainerFields warns of the trainer container's fields a TrainJob has no place
// for (image, command, args, env, resources and ports are handled; volume mounts and the
// security context go into the runtime patch).
func uncarriedContainerFields(ct corev1.Container, ctPath string, c *conversion) {
	check := map[string]bool{
		"workingDir":               ct.WorkingDir != "",
		"envFrom":                  len(ct.EnvFrom) > 0,
		"imagePullPolicy":          ct.ImagePullPolicy != "",
		"livenessProbe":            ct.LivenessProbe != nil,
		"readinessProbe":           ct.ReadinessProbe != nil,
		"startupProbe":             ct.StartupProbe != nil,
		"lifecycle":                ct.Lifecycle != nil,
		"stdin":                    ct.Stdin,
		"tty":                      ct.TTY,
		"terminationMessagePath":   ct.TerminationMessagePath != "",
		"terminationMessagePolicy": ct.TerminationMessagePolicy != "",
		"volumeDevices":            len(ct.VolumeDevices) > 0,
		"resizePolicy":             len(ct.ResizePolicy) > 0,
		"restartPolicy":            ct.RestartPolicy != nil,
	}
	for _, f := range slices.Sorted(maps.Keys(check)) {
		if check[f] {
			c.warn(ctPath+"."+f, "a TrainJob cannot set it on the trainer container: not carried over (set it in a runtime of your own)")
		}
	}
}

// podPatch carries the pod's scheduling, identity and volumes into a runtime patch of the
// trainer's pods; what a patch cannot hold is warned of.
func podPatch(tpl corev1.PodTemplateSpec, ci int, tplPath string, c *conversion) *trainer.RuntimePatch {
	pod := tpl.Spec
	spec := &trainer.PodSpecPatch{
		NodeSelector: pod.NodeSelector, Affinity: pod.Affinity, Tolerations: pod.Tolerations, Volumes: pod.Volumes,
		ImagePullSecrets: pod.ImagePullSecrets, SecurityContext: pod.SecurityContext,
		TerminationGracePeriodSeconds: pod.TerminationGracePeriodSeconds, SchedulingGates: pod.SchedulingGates,
	}
	if pod.ServiceAccountName != "" {
		spec.ServiceAccountName = ptr.To(pod.ServiceAccountName)
	}
	ct := pod.Containers[ci]
	if len(ct.VolumeMounts) > 0 || ct.SecurityContext != nil {
		spec.Containers = []trainer.ContainerPatch{{Name: nodeContainer, VolumeMounts: ct.VolumeMounts, SecurityContext: ct.SecurityContext}}
	}
	for i, other := range pod.Containers {
		if i != ci {
			c.warn(fmt.Sprintf("%s.spec.containers[%d]", tplPath, i), "container %s: Kiln's runtimes run one trainer container; a sidecar needs a runtime of your own", other.Name)
		}
	}
	for i, ic := range pod.InitContainers {
		c.warn(fmt.Sprintf("%s.spec.initContainers[%d]", tplPath, i), "init container %s: a runtime patch can only change the runtime's own init containers; add it to a runtime of your own", ic.Name)
	}
	podFields := map[string]bool{
		"priorityClassName":            pod.PriorityClassName != "",
		"hostNetwork":                  pod.HostNetwork,
		"hostIPC":                      pod.HostIPC,
		"hostPID":                      pod.HostPID,
		"dnsPolicy":                    pod.DNSPolicy != "",
		"dnsConfig":                    pod.DNSConfig != nil,
		"runtimeClassName":             pod.RuntimeClassName != nil,
		"schedulerName":                pod.SchedulerName != "",
		"topologySpreadConstraints":    len(pod.TopologySpreadConstraints) > 0,
		"hostAliases":                  len(pod.HostAliases) > 0,
		"shareProcessNamespace":        pod.ShareProcessNamespace != nil,
		"nodeName":                     pod.NodeName != "",
		"activeDeadlineSeconds":        pod.ActiveDeadlineSeconds != nil,
		"automountServiceAccountToken": pod.AutomountServiceAccountToken != nil,
		"priority":                     pod.Priority != nil,
		"preemptionPolicy":             pod.PreemptionPolicy != nil,
		"overhead":                     len(pod.Overhead) > 0,
		"resourceClaims":               len(pod.ResourceClaims) > 0,
		"hostname":                     pod.Hostname != "",
		"subdomain":                    pod.Subdomain != "",
		"enableServiceLinks":           pod.EnableServiceLinks != nil,
		"os":                           pod.OS != nil,
		"readinessGates":               len(pod.ReadinessGates) > 0,
		"deprecatedServiceAccount":     pod.DeprecatedServiceAccount != "" && pod.DeprecatedServiceAccount != pod.ServiceAccountName,
		"ephemeralContainers":          len(pod.EphemeralContainers) > 0,
		"setHostnameAsFQDN":            pod.SetHostnameAsFQDN != nil,
		"hostUsers":                    pod.HostUsers != nil,
		"resources":                    pod.Resources != nil,
	}
	for _, f := range slices.Sorted(maps.Keys(podFields)) {
		if podFields[f] {
			c.warn(tplPath+".spec."+f, "a runtime patch cannot set it: not carried over (set it in a runtime of your own)")
		}
	}
	var meta *metav1.ObjectMeta
	if len(tpl.Labels) > 0 || len(tpl.Annotations) > 0 {
		meta = &metav1.ObjectMeta{Labels: tpl.Labels, Annotations: tpl.Annotations}
	}
	if apiequality.Semantic.DeepEqual(spec, &trainer.PodSpecPatch{}) && meta == nil {
		return nil
	}
	if apiequality.Semantic.DeepEqual(spec, &trainer.PodSpecPatch{}) {
		spec = nil
	}
	return &trainer.RuntimePatch{Manager: Manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: nodeJob, Template: &trainer.JobTemplatePatch{
			Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Metadata: meta, Spec: spec}},
		}}}},
	}}}
}

// sortedTrue lists the keys whose value is true, sorted.
func sortedTrue(m map[string]bool) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] {
			out = append(out, k)
		}
	}
	return out
}
