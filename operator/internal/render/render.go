package render

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// TrainerPort is the port of the trainer's rendezvous (torch master, JAX coordinator,
// XGBoost tracker).
const TrainerPort = 29500

// Result is what a TrainJob renders into.
type Result struct {
	JobSet *jobsetv1alpha2.JobSet
	// HostfileConfigMap is the MPI hostfile, for MPI runtimes.
	HostfileConfigMap *corev1.ConfigMap
	// NeedsSSHSecret says the MPI SSH key Secret (SSHSecretName) must exist.
	NeedsSSHSecret bool
	// PodGroup is the gang of the runtime's podGroupPolicy (a scheduler-plugins or a Volcano
	// PodGroup), or nil.
	PodGroup client.Object
}

// job is one replicated job being rendered, with its pod count.
type job struct {
	rj       *jobsetv1alpha2.ReplicatedJob
	ancestor string
	count    int32
}

func (j *job) container(name string) *corev1.Container {
	cs := j.rj.Template.Spec.Template.Spec.Containers
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	ics := j.rj.Template.Spec.Template.Spec.InitContainers
	for i := range ics {
		if ics[i].Name == name {
			return &ics[i]
		}
	}
	return nil
}

type renderer struct {
	tj     *trainer.TrainJob
	policy *trainer.MLPolicy
	spec   *jobsetv1alpha2.JobSetSpec
	jobs   []*job
}

func (r *renderer) byAncestor(ancestor string) *job {
	for _, j := range r.jobs {
		if j.ancestor == ancestor {
			return j
		}
	}
	return nil
}

func (r *renderer) byName(name string) *job {
	for _, j := range r.jobs {
		if j.rj.Name == name {
			return j
		}
	}
	return nil
}

// trainerContainer is the `node` container of the trainer job, or nil.
func (r *renderer) trainerContainer() *corev1.Container {
	if j := r.byAncestor(trainer.AncestorTrainer); j != nil {
		return j.container(trainer.NodeName)
	}
	return nil
}

// Render renders tj from the runtime spec it was pinned to.
func Render(tj *trainer.TrainJob, rt *trainer.TrainingRuntimeSpec) (*Result, error) {
	spec, labels, annotations, err := patchedTemplate(tj, rt)
	if err != nil {
		return nil, err
	}
	r := &renderer{tj: tj, policy: rt.MLPolicy, spec: spec}
	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		j := &job{rj: rj, ancestor: rj.Template.Labels[trainer.LabelTrainJobAncestor], count: ptr.Deref(rj.Template.Spec.Parallelism, 1)}
		if j.ancestor == trainer.AncestorTrainer && r.policy != nil {
			j.count = ptr.Deref(r.policy.NumNodes, 1)
		}
		j.count = max(j.count, 1)
		r.jobs = append(r.jobs, j)
	}
	r.mergeResourcesPerNode()

	res := &Result{}
	switch {
	case r.policy == nil:
		r.plain()
	case r.policy.Torch != nil:
		if err := r.torch(); err != nil {
			return nil, err
		}
	case r.policy.MPI != nil:
		cm, err := r.mpi()
		if err != nil {
			return nil, err
		}
		res.HostfileConfigMap, res.NeedsSSHSecret = cm, true
	case r.policy.JAX != nil:
		r.jax()
	case r.policy.XGBoost != nil:
		r.xgboost()
		r.plain()
	default:
		r.plain()
	}
	for _, j := range r.jobs {
		j.rj.Template.Spec.Parallelism = ptr.To(j.count)
		j.rj.Template.Spec.Completions = ptr.To(j.count)
	}
	r.initializers()
	r.trainerOverrides()
	res.PodGroup = r.podGroup(rt.PodGroupPolicy, annotations)

	res.JobSet = &jobsetv1alpha2.JobSet{
		TypeMeta: metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            tj.Name,
			Namespace:       tj.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{OwnerReference(tj)},
		},
		Spec: *spec,
	}
	res.JobSet.Spec.Suspend = tj.Spec.Suspend
	return res, nil
}

// OwnerReference makes tj the controller of an object.
func OwnerReference(tj *trainer.TrainJob) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         trainer.GroupVersion.String(),
		Kind:               trainer.TrainJobKind,
		Name:               tj.Name,
		UID:                tj.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// patchedTemplate applies the runtime patches, in order, to the runtime's JobSet template.
// Rendering always starts from the pinned runtime, so whatever a manager removes from its
// patch disappears from the JobSet too.
func patchedTemplate(tj *trainer.TrainJob, rt *trainer.TrainingRuntimeSpec) (*jobsetv1alpha2.JobSetSpec, map[string]string, map[string]string, error) {
	spec := rt.Template.Spec.DeepCopy()
	labels := copyMap(rt.Template.Labels)
	annotations := copyMap(rt.Template.Annotations)
	order := make([]string, len(spec.ReplicatedJobs))
	for i, rj := range spec.ReplicatedJobs {
		order[i] = rj.Name
	}
	for i, p := range tj.Spec.RuntimePatches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
			continue
		}
		tmpl := p.TrainingRuntimeSpec.Template
		if tmpl.Metadata != nil {
			labels = overlay(labels, tmpl.Metadata.Labels)
			annotations = overlay(annotations, tmpl.Metadata.Annotations)
		}
		if tmpl.Spec == nil {
			continue
		}
		orig, err := json.Marshal(spec)
		if err != nil {
			return nil, nil, nil, err
		}
		patch, err := json.Marshal(tmpl.Spec)
		if err != nil {
			return nil, nil, nil, err
		}
		merged, err := strategicpatch.StrategicMergePatch(orig, patch, jobsetv1alpha2.JobSetSpec{})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("spec.runtimePatches[%d] (manager %s): %w", i, p.Manager, err)
		}
		next := &jobsetv1alpha2.JobSetSpec{}
		if err := json.Unmarshal(merged, next); err != nil {
			return nil, nil, nil, fmt.Errorf("spec.runtimePatches[%d] (manager %s): %w", i, p.Manager, err)
		}
		spec = next
	}
	// A patch may only touch existing replicated jobs; keep the runtime's order.
	sorted := make([]jobsetv1alpha2.ReplicatedJob, 0, len(spec.ReplicatedJobs))
	for _, name := range order {
		for _, rj := range spec.ReplicatedJobs {
			if rj.Name == name {
				sorted = append(sorted, rj)
			}
		}
	}
	spec.ReplicatedJobs = sorted
	return spec, labels, annotations, nil
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func overlay(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// mergeResourcesPerNode merges spec.trainer.resourcesPerNode into each training node's
// `node` container.
func (r *renderer) mergeResourcesPerNode() {
	if r.tj.Spec.Trainer == nil || r.tj.Spec.Trainer.ResourcesPerNode == nil {
		return
	}
	for _, j := range r.jobs {
		if !(j.ancestor == trainer.AncestorTrainer && r.policy != nil) && !(r.launcherAsNode() && j.rj.Name == trainer.NodeName) {
			continue
		}
		if c := j.container(trainer.NodeName); c != nil {
			c.Resources = mergeResources(c.Resources, *r.tj.Spec.Trainer.ResourcesPerNode)
		}
	}
}

func mergeResources(base, override corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *base.DeepCopy()
	for name, q := range override.Limits {
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
		out.Limits[name] = q
	}
	for name, q := range override.Requests {
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		out.Requests[name] = q
	}
	for _, c := range override.Claims {
		replaced := false
		for i := range out.Claims {
			if out.Claims[i].Name == c.Name {
				out.Claims[i], replaced = c, true
			}
		}
		if !replaced {
			out.Claims = append(out.Claims, c)
		}
	}
	return out
}

func (r *renderer) launcherAsNode() bool {
	return r.policy != nil && r.policy.MPI != nil && ptr.Deref(r.policy.MPI.RunLauncherAsNode, false)
}

// resourcesPerNode is what one training node asks for: the TrainJob's, else the runtime's.
func (r *renderer) resourcesPerNode() corev1.ResourceRequirements {
	if r.tj.Spec.Trainer != nil && r.tj.Spec.Trainer.ResourcesPerNode != nil {
		return *r.tj.Spec.Trainer.ResourcesPerNode
	}
	for _, j := range r.jobs {
		if j.rj.Name == trainer.NodeName || j.ancestor == trainer.AncestorTrainer {
			if c := j.container(trainer.NodeName); c != nil {
				return c.Resources
			}
		}
	}
	return corev1.ResourceRequirements{}
}

// gpusPerNode counts any resource whose name contains "gpu", from requests, else limits.
func gpusPerNode(res corev1.ResourceRequirements) int64 {
	for _, list := range []corev1.ResourceList{res.Requests, res.Limits} {
		for name, q := range list {
			if strings.Contains(strings.ToLower(string(name)), "gpu") {
				return q.Value()
			}
		}
	}
	return 0
}

func cpusPerNode(res corev1.ResourceRequirements) int64 {
	req, lim := res.Requests.Cpu(), res.Limits.Cpu()
	if req == nil || req.IsZero() {
		if lim != nil {
			return lim.Value()
		}
		return 0
	}
	return req.Value()
}

// setTrainerCount sets the trainer job's node count from spec.trainer.numNodes.
func (r *renderer) setTrainerCount() *job {
	j := r.byAncestor(trainer.AncestorTrainer)
	if j != nil && r.tj.Spec.Trainer != nil && r.tj.Spec.Trainer.NumNodes != nil {
		j.count = *r.tj.Spec.Trainer.NumNodes
	}
	return j
}

// masterHost is the first trainer pod's stable DNS name under the JobSet's headless service.
func (r *renderer) masterHost() string {
	return fmt.Sprintf("%s-%s-0-0.%s", r.tj.Name, trainer.NodeName, r.tj.Name)
}

func (r *renderer) plain() {
	r.setTrainerCount()
	if c := r.trainerContainer(); c != nil && r.tj.Spec.Trainer != nil {
		upsertEnv(&c.Env, r.tj.Spec.Trainer.Env...)
	}
}

// initializers configures the dataset and model initializer jobs.
func (r *renderer) initializers() {
	in := r.tj.Spec.Initializer
	for _, j := range r.jobs {
		if j.ancestor != trainer.AncestorDatasetInitializer && j.ancestor != trainer.AncestorModelInitializer {
			continue
		}
		j.rj.Replicas = 1
		if in == nil {
			continue
		}
		var uri *string
		var env []corev1.EnvVar
		var secret *corev1.LocalObjectReference
		switch {
		case j.ancestor == trainer.AncestorDatasetInitializer && in.Dataset != nil:
			uri, env, secret = in.Dataset.StorageUri, in.Dataset.Env, in.Dataset.SecretRef
		case j.ancestor == trainer.AncestorModelInitializer && in.Model != nil:
			uri, env, secret = in.Model.StorageUri, in.Model.Env, in.Model.SecretRef
		default:
			continue
		}
		c := j.container(j.ancestor)
		if c == nil {
			continue
		}
		if uri != nil {
			upsertEnv(&c.Env, value("STORAGE_URI", *uri))
		}
		upsertEnv(&c.Env, env...)
		if secret != nil {
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: *secret}})
		}
	}
}

// trainerOverrides applies spec.trainer's image, command, args and env.
func (r *renderer) trainerOverrides() {
	t := r.tj.Spec.Trainer
	for _, j := range r.jobs {
		if j.ancestor == trainer.AncestorTrainer {
			j.rj.Replicas = 1
			if c := j.container(trainer.NodeName); c != nil && t != nil {
				if t.Image != nil {
					c.Image = *t.Image
				}
				if t.Command != nil {
					c.Command = t.Command
				}
				if t.Args != nil {
					c.Args = t.Args
				}
			}
		}
		if j.ancestor == trainer.AncestorTrainer || (r.launcherAsNode() && j.rj.Name == trainer.NodeName) {
			if c := j.container(trainer.NodeName); c != nil && t != nil {
				upsertEnv(&c.Env, t.Env...)
			}
		}
	}
}
