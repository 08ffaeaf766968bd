package webhook

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Pod security: a TrainJob's pods may not take the node. Whoever may create a TrainJob
// (the chart's kiln-user has no pod rights) could otherwise run, through a runtime patch or
// a namespaced runtime of their own, a privileged container with the node's filesystem
// mounted: root on the node. Pod Security admission would refuse those pods only when the
// Job controller creates them, long after the job was accepted and admitted by Kueue; Kiln
// refuses the TrainJob when it is submitted, naming what breaks Pod Security's baseline
// level. An admin allows it for jobs on a ClusterTrainingRuntime (annotation) or in a
// namespace (label): kiln.dev/pod-security: privileged.

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// baselineCapabilities are the capabilities Pod Security's baseline level lets a container add.
var baselineCapabilities = []corev1.Capability{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
	"SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// podSecurityViolations lists what the JobSet's pod templates would run with beyond Pod
// Security's baseline: host namespaces, host paths and ports, privileged containers, added
// capabilities. Each names its replicated job, container and field.
func podSecurityViolations(js *jobsetv1alpha2.JobSet) map[string][]string {
	out := map[string][]string{}
	for _, rj := range js.Spec.ReplicatedJobs {
		var v []string
		pod := &rj.Template.Spec.Template.Spec
		for name, on := range map[string]bool{"hostNetwork": pod.HostNetwork, "hostPID": pod.HostPID, "hostIPC": pod.HostIPC} {
			if on {
				v = append(v, name+": true")
			}
		}
		for _, vol := range pod.Volumes {
			if vol.HostPath != nil {
				v = append(v, fmt.Sprintf("volumes[%s].hostPath (%s)", vol.Name, vol.HostPath.Path))
			}
		}
		for kind, cs := range map[string][]corev1.Container{"containers": pod.Containers, "initContainers": pod.InitContainers} {
			for _, c := range cs {
				at := fmt.Sprintf("%s[%s]", kind, c.Name)
				for _, p := range c.Ports {
					if p.HostPort != 0 {
						v = append(v, fmt.Sprintf("%s.ports[%d].hostPort", at, p.ContainerPort))
					}
				}
				sc := c.SecurityContext
				if sc == nil {
					continue
				}
				if ptr.Deref(sc.Privileged, false) {
					v = append(v, at+".securityContext.privileged: true")
				}
				if sc.Capabilities != nil {
					for _, c := range sc.Capabilities.Add {
						if !slices.Contains(baselineCapabilities, corev1.Capability(strings.TrimPrefix(string(c), "CAP_"))) {
							v = append(v, fmt.Sprintf("%s.securityContext.capabilities.add: %s", at, c))
						}
					}
				}
			}
		}
		if len(v) > 0 {
			slices.Sort(v)
			out[rj.Name] = v
		}
	}
	return out
}

// validatePodSecurity refuses a TrainJob whose pods would break Pod Security's baseline,
// unless an admin allowed it for its runtime or namespace. Each refusal names the runtime
// patch that sets it, or else the runtime whose template does.
func (v *Validator) validatePodSecurity(ctx context.Context, tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet) field.ErrorList {
	found := podSecurityViolations(js)
	if len(found) == 0 || v.podSecurityExempt(ctx, tj) {
		return nil
	}
	var errs field.ErrorList
	for _, rj := range slices.Sorted(maps.Keys(found)) {
		path, by := patchOf(tj, rj)
		errs = append(errs, field.Forbidden(path, fmt.Sprintf(
			"%s would run replicated job %q's pods with %s, which Pod Security's baseline level refuses: they would take the node. "+
				"Remove it; an admin allows it with the annotation %s: privileged on the ClusterTrainingRuntime, or the label on the namespace",
			by, rj, strings.Join(found[rj], ", "), kiln.AnnotationPodSecurity)))
	}
	return errs
}

// patchOf is where the TrainJob sets replicated job rj's pod spec: the first of its own
// runtime patches that does (Kueue's are Kueue's), else its runtime, which does.
func patchOf(tj *trainer.TrainJob, rj string) (*field.Path, string) {
	for i, p := range tj.Spec.RuntimePatches {
		if strings.HasPrefix(p.Manager, kueueManagerPrefix) || p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil ||
			p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		for j, r := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			if r.Name == rj && r.Template != nil && r.Template.Spec != nil && r.Template.Spec.Template != nil && r.Template.Spec.Template.Spec != nil {
				return field.NewPath("spec", "runtimePatches").Index(i).Child("trainingRuntimeSpec", "template", "spec", "replicatedJobs").
					Index(j).Child("template", "spec", "template", "spec"), fmt.Sprintf("runtime patch %q", p.Manager)
			}
		}
	}
	kind := ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)
	return field.NewPath("spec", "runtimeRef"), fmt.Sprintf("%s %q", kind, tj.Spec.RuntimeRef.Name)
}

// podSecurityExempt says whether an admin allowed the TrainJob's pods beyond baseline: its
// ClusterTrainingRuntime (cluster-scoped: only an admin writes it) or its namespace is
// marked kiln.dev/pod-security: privileged. A namespaced runtime cannot exempt itself.
func (v *Validator) podSecurityExempt(ctx context.Context, tj *trainer.TrainJob) bool {
	if ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind) == trainer.ClusterTrainingRuntimeKind {
		rt := &trainer.ClusterTrainingRuntime{}
		if err := v.live.Get(ctx, types.NamespacedName{Name: tj.Spec.RuntimeRef.Name}, rt); err == nil &&
			rt.Annotations[kiln.AnnotationPodSecurity] == kiln.PodSecurityPrivileged {
			return true
		}
	}
	ns := &corev1.Namespace{}
	return v.live.Get(ctx, types.NamespacedName{Name: tj.Namespace}, ns) == nil && ns.Labels[kiln.AnnotationPodSecurity] == kiln.PodSecurityPrivileged
}
