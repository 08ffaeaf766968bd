package render

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelpers "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	coscheduling "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcano "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Gang scheduling, as Kubeflow Trainer v2.3 renders a runtime's podGroupPolicy: one
// PodGroup named after the TrainJob and owned by it, whose minMember is every pod of the
// job (initializers too) and whose minResources are the sum of their requests; every pod
// names it (coscheduling: a label, Volcano: an annotation). The scheduler that acts on it is
// the one the runtime's pod templates name (spec.schedulerName), as upstream: Kiln does not
// choose it.

// podGroup renders the runtime's PodGroup (nil without a podGroupPolicy) and names it on
// every pod template. It runs once the pod counts and templates are final.
func (r *renderer) podGroup(policy *trainer.PodGroupPolicy, annotations map[string]string) client.Object {
	if policy == nil || (policy.Coscheduling == nil && policy.Volcano == nil) {
		return nil
	}
	var members int32
	requests := corev1.ResourceList{}
	for _, j := range r.jobs {
		members += j.count
		pod := &corev1.Pod{Spec: j.rj.Template.Spec.Template.Spec}
		for name, q := range resourcehelpers.PodRequests(pod, resourcehelpers.PodResourcesOptions{}) {
			q.Mul(int64(j.count))
			sum := requests[name]
			sum.Add(q)
			requests[name] = sum
		}
	}
	meta := metav1.ObjectMeta{Name: r.tj.Name, Namespace: r.tj.Namespace, OwnerReferences: []metav1.OwnerReference{OwnerReference(r.tj)}}
	if c := policy.Coscheduling; c != nil {
		for _, j := range r.jobs {
			tmpl := &j.rj.Template.Spec.Template
			tmpl.Labels = overlay(tmpl.Labels, map[string]string{coscheduling.PodGroupLabel: r.tj.Name})
		}
		return &coscheduling.PodGroup{
			TypeMeta:   metav1.TypeMeta{APIVersion: coscheduling.SchemeGroupVersion.String(), Kind: "PodGroup"},
			ObjectMeta: meta,
			Spec:       coscheduling.PodGroupSpec{MinMember: members, MinResources: requests, ScheduleTimeoutSeconds: c.ScheduleTimeoutSeconds},
		}
	}
	v := policy.Volcano
	spec := volcano.PodGroupSpec{MinMember: members, MinResources: &requests}
	// The queue comes from the runtime template's annotations (runtime patches included).
	if q, ok := annotations[volcano.QueueNameAnnotationKey]; ok {
		spec.Queue = q
	}
	for _, j := range r.jobs {
		tmpl := &j.rj.Template.Spec.Template
		tmpl.Annotations = overlay(tmpl.Annotations, map[string]string{volcano.KubeGroupNameAnnotationKey: r.tj.Name})
		// The last replicated job that names a priority class gives the group's.
		if pc := tmpl.Spec.PriorityClassName; pc != "" {
			spec.PriorityClassName = pc
		}
	}
	if nt := v.NetworkTopology; nt != nil {
		spec.NetworkTopology = &volcano.NetworkTopologySpec{Mode: volcano.NetworkTopologyMode(nt.Mode), HighestTierAllowed: nt.HighestTierAllowed}
	}
	return &volcano.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: volcano.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: meta,
		Spec:       spec,
	}
}
