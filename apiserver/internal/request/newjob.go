// Package request reads what callers send to create jobs into Kubernetes objects: a
// NewTrainJob or NewCronTrainJob message, or a manifest, each checked field by field so
// that an error names the field and the fix. Everything here is pure: no clients, no clocks.
package request

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// MaxNameLength is the longest TrainJob name: it names a JobSet, whose name becomes part
// of its pods' hostnames (DNS labels).
const MaxNameLength = 63

// NewTrainJob builds the TrainJob that in describes, or says which fields are wrong and
// how. Paths start at path (e.g. "train_job").
func NewTrainJob(namespace string, in *kilnv1.NewTrainJob, path *field.Path) (*trainer.TrainJob, field.ErrorList) {
	var errs field.ErrorList
	tj := &trainer.TrainJob{
		TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name: in.GetName(), GenerateName: in.GetGenerateName(), Namespace: namespace,
			Labels: copyMap(in.GetLabels()), Annotations: copyMap(in.GetAnnotations()),
		},
	}
	switch {
	case in.GetName() == "" && in.GetGenerateName() == "":
		errs = append(errs, field.Required(path.Child("name"), "set name, or generate_name for a name the server completes"))
	case in.GetName() != "" && in.GetGenerateName() != "":
		errs = append(errs, field.Invalid(path.Child("generate_name"), in.GetGenerateName(), "set either name or generate_name, not both"))
	case in.GetName() != "":
		errs = append(errs, ValidateName(path.Child("name"), in.GetName())...)
	default:
		prefix := in.GetGenerateName()
		if len(prefix) > MaxNameLength-5 {
			errs = append(errs, field.TooLong(path.Child("generate_name"), prefix, MaxNameLength-5))
		} else {
			errs = append(errs, ValidateName(path.Child("generate_name"), prefix+"x")...)
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(in.GetLabels(), path.Child("labels"))...)

	spec := in.GetSpec()
	sp := path.Child("spec")
	if spec == nil {
		return nil, append(errs, field.Required(sp, "the job's spec: at least its runtime"))
	}
	errs = append(errs, applySpec(tj, spec, sp)...)
	if len(errs) > 0 {
		return nil, errs
	}
	return tj, nil
}

// ValidateName checks a TrainJob name.
func ValidateName(path *field.Path, name string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1035Label(name) {
		errs = append(errs, field.Invalid(path, name, msg+" (the name becomes part of its pods' hostnames)"))
	}
	return errs
}

func applySpec(tj *trainer.TrainJob, spec *kilnv1.TrainJobSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.GetRuntime() == "" {
		errs = append(errs, field.Required(sp.Child("runtime"), "name a TrainingRuntime or ClusterTrainingRuntime, e.g. torch-distributed (`kiln runtimes list`)"))
	}
	kind := trainer.ClusterTrainingRuntimeKind
	if spec.GetRuntimeKind() == kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED {
		kind = trainer.TrainingRuntimeKind
	}
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: spec.GetRuntime(), Kind: ptr.To(kind), APIGroup: ptr.To(trainer.GroupVersion.Group)}

	t := &trainer.Trainer{}
	if spec.GetImage() != "" {
		t.Image = ptr.To(spec.GetImage())
	}
	t.Command, t.Args = spec.GetCommand(), spec.GetArgs()
	seen := map[string]bool{}
	for i, e := range spec.GetEnv() {
		p := sp.Child("env").Index(i).Child("name")
		for _, msg := range validation.IsEnvVarName(e.GetName()) {
			errs = append(errs, field.Invalid(p, e.GetName(), msg))
		}
		if seen[e.GetName()] {
			errs = append(errs, field.Duplicate(p, e.GetName()))
		}
		seen[e.GetName()] = true
		t.Env = append(t.Env, corev1.EnvVar{Name: e.GetName(), Value: e.GetValue()})
	}
	switch n := spec.GetNodes(); {
	case n < 0:
		errs = append(errs, field.Invalid(sp.Child("nodes"), n, "must be at least 1, or 0 for the runtime's number of nodes"))
	case n > 0:
		t.NumNodes = ptr.To(n)
	}
	switch n := spec.GetProcsPerNode(); {
	case n < 0:
		errs = append(errs, field.Invalid(sp.Child("procs_per_node"), n, "must be at least 1, or 0 for the runtime's"))
	case n > 0:
		t.NumProcPerNode = ptr.To(n)
	}
	if r := spec.GetResourcesPerNode(); r != nil && (len(r.GetRequests()) > 0 || len(r.GetLimits()) > 0) {
		rp := sp.Child("resources_per_node")
		requests, rerrs := resourceList(r.GetRequests(), rp.Child("requests"))
		limits, lerrs := resourceList(r.GetLimits(), rp.Child("limits"))
		errs = append(errs, append(rerrs, lerrs...)...)
		t.ResourcesPerNode = &corev1.ResourceRequirements{Requests: requests, Limits: limits}
	}
	if !apiTrainerEmpty(t) {
		tj.Spec.Trainer = t
	}
	if u := spec.GetDatasetUri(); u != "" {
		tj.Spec.Initializer = ensureInitializer(tj.Spec.Initializer)
		tj.Spec.Initializer.Dataset = &trainer.DatasetInitializer{StorageUri: ptr.To(u)}
	}
	if u := spec.GetModelUri(); u != "" {
		tj.Spec.Initializer = ensureInitializer(tj.Spec.Initializer)
		tj.Spec.Initializer.Model = &trainer.ModelInitializer{StorageUri: ptr.To(u)}
	}
	for _, l := range []struct {
		value, label, field string
	}{{spec.GetQueue(), trainer.KueueQueueNameLabel, "queue"}, {spec.GetPriorityClass(), trainer.KueuePriorityClassLabel, "priority_class"}} {
		if l.value == "" {
			continue
		}
		for _, msg := range validation.IsValidLabelValue(l.value) {
			errs = append(errs, field.Invalid(sp.Child(l.field), l.value, msg))
		}
		if tj.Labels == nil {
			tj.Labels = map[string]string{}
		}
		tj.Labels[l.label] = l.value
	}
	if spec.GetSuspend() {
		tj.Spec.Suspend = ptr.To(true)
	}
	if d := spec.ActiveDeadlineSeconds; d != nil {
		if *d < 1 {
			errs = append(errs, field.Invalid(sp.Child("active_deadline_seconds"), *d, "must be at least 1 (seconds); leave it unset for no deadline"))
		}
		tj.Spec.ActiveDeadlineSeconds = ptr.To(*d)
	}
	if ttl := spec.TtlSecondsAfterFinished; ttl != nil {
		if *ttl < 0 {
			errs = append(errs, field.Invalid(sp.Child("ttl_seconds_after_finished"), *ttl, "must be at least 0 (seconds; 0 deletes the job as soon as it finishes); leave it unset to keep it"))
		}
		tj.Spec.TTLSecondsAfterFinished = ptr.To(*ttl)
	}
	return errs
}

func apiTrainerEmpty(t *trainer.Trainer) bool {
	return t.Image == nil && t.Command == nil && t.Args == nil && t.Env == nil && t.NumNodes == nil &&
		t.NumProcPerNode == nil && t.ResourcesPerNode == nil
}

func ensureInitializer(in *trainer.Initializer) *trainer.Initializer {
	if in == nil {
		return &trainer.Initializer{}
	}
	return in
}

func resourceList(in map[string]string, p *field.Path) (corev1.ResourceList, field.ErrorList) {
	if len(in) == 0 {
		return nil, nil
	}
	var errs field.ErrorList
	out := corev1.ResourceList{}
	given := map[corev1.ResourceName]string{} // what each resource was called in the request
	names := make([]string, 0, len(in))
	for k := range in {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		v := in[name]
		kp := p.Key(name)
		if msgs := validation.IsQualifiedName(strings.TrimPrefix(name, "requests.")); len(msgs) > 0 {
			errs = append(errs, field.Invalid(kp, name, "not a resource name: "+strings.Join(msgs, "; ")))
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			errs = append(errs, field.Invalid(kp, v, fmt.Sprintf("not a quantity (%v): write e.g. 4, 500m, 16Gi", err)))
			continue
		}
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(kp, v, "must not be negative"))
			continue
		}
		rn := resourceName(name)
		if first, ok := given[rn]; ok {
			errs = append(errs, field.Duplicate(kp, fmt.Sprintf("%s is %s, already given as %s: give it once", name, rn, first)))
			continue
		}
		given[rn] = name
		out[rn] = q
	}
	return out, errs
}

// resourceName spells a resource as Kubernetes does from the Kubeflow SDK's spelling, as that
// SDK normalises it: the standard names in any case ("CPU"), "gpu" for nvidia.com/gpu,
// "storage" for ephemeral-storage, "mig-<profile>" for nvidia.com/mig-<profile>. Any other
// extended resource keeps its case.
func resourceName(name string) corev1.ResourceName {
	lower := strings.ToLower(name)
	switch lower {
	case "cpu", "memory", "ephemeral-storage":
		return corev1.ResourceName(lower)
	case "gpu":
		return "nvidia.com/gpu"
	case "storage":
		return corev1.ResourceEphemeralStorage
	}
	if strings.HasPrefix(lower, "mig-") {
		return corev1.ResourceName("nvidia.com/" + lower)
	}
	return corev1.ResourceName(name)
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TopologyPatch is the runtime patch, by manager, that asks Kueue to place the pods of the
// runtime's replicated job job in one domain of the topology level with node label
// nodeLabel: Kueue's pod set annotation on its pod template (required, or preferred).
func TopologyPatch(manager, job, nodeLabel string, preferred bool) trainer.RuntimePatch {
	key := kueue.AnnotationRequiredTopology
	if preferred {
		key = kueue.AnnotationPreferredTopology
	}
	return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: job, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
			Template: &trainer.PodTemplatePatch{Metadata: &metav1.ObjectMeta{Annotations: map[string]string{key: nodeLabel}}},
		}}}}},
	}}}
}
