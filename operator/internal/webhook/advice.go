package webhook

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kiln-ml/kiln/api/kueue"
	"github.com/kiln-ml/kiln/api/suggest"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/render"
)

// A new TrainJob that is valid may still never start: its LocalQueue does not exist, it asks
// for more than its ClusterQueue can ever admit, or its pods mount a claim, Secret or
// ConfigMap the namespace lacks. None of these is refused (Kueue lets the queue be created
// later; the claim may be on its way), but each is said at once, as an admission warning:
// kubectl prints it, and the API server hands it to the CLI and the SDKs. Advice is read only
// when a job is created: Kueue's queues from the cache (past it for one the cache lacks), the
// objects the pods need past the cache (caching every claim, Secret and ConfigMap of the
// cluster would cost more than the reads).
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=localqueues;clusterqueues;cohorts,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// maxListed is how many names a warning lists before "and N more".
const maxListed = 8

// advise returns the warnings for a new TrainJob rendered into res.
func (v *Validator) advise(ctx context.Context, tj *trainer.TrainJob, res *render.Result) admission.Warnings {
	if v.live == nil {
		return nil
	}
	var out admission.Warnings
	out = append(out, v.adviseQueue(ctx, tj, res.JobSet)...)
	out = append(out, v.adviseReferences(ctx, tj, res)...)
	out = append(out, adviseCommand(tj, res.JobSet)...)
	out = append(out, v.adviseNodes(ctx, tj, res.JobSet)...)
	return out
}

// adviseNodes warns when a job that no Kueue queue admits asks, per pod, for more of a
// resource than any node offers (a GPU on a CPU-only cluster, "gpu" misspelt): its pods would
// stay Pending with no word to the job's owner. Kueue's quota stands in for the nodes of a
// queued job (adviseQueue), which may run on another cluster. Nodes come from the cache,
// which keeps of each only what it offers; a cluster with no node yet (one an autoscaler
// grows from zero) is not warned of.
func (v *Validator) adviseNodes(ctx context.Context, tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet) []string {
	if tj.Labels[trainer.KueueQueueNameLabel] != "" {
		return nil
	}
	nodes := &corev1.NodeList{}
	if err := v.client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).V(1).Info("no advice on nodes: listing them failed", "error", err.Error())
		return nil
	}
	if len(nodes.Items) == 0 {
		return nil
	}
	most := corev1.ResourceList{} // the most of each resource that one node offers
	for _, n := range nodes.Items {
		for name, q := range n.Status.Allocatable {
			if cur, ok := most[name]; !ok || q.Cmp(cur) > 0 {
				most[name] = q
			}
		}
	}
	var out []string
	for _, rj := range js.Spec.ReplicatedJobs {
		asked := podRequests(&rj.Template.Spec.Template.Spec)
		for _, name := range slices.Sorted(maps.Keys(asked)) {
			q := asked[name]
			m, offered := most[name]
			switch {
			case q.IsZero():
			case !offered:
				out = append(out, fmt.Sprintf("no node offers %s, of which each pod of %s asks for %s: its pods would stay Pending until a node with it joins. Ask for what the nodes offer (%s), or add nodes that offer it",
					name, rj.Name, q.String(), suggest.List(resourceNames(most), maxListed)))
			case q.Cmp(m) > 0:
				out = append(out, fmt.Sprintf("each pod of %s asks for %s %s, more than any node offers (at most %s): its pods would stay Pending until a larger node joins. Ask for less per node (and more nodes), or add larger nodes",
					rj.Name, q.String(), name, m.String()))
			}
		}
	}
	return out
}

func resourceNames(l corev1.ResourceList) []string {
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, string(name))
	}
	slices.Sort(names)
	return names
}

// adviseQueue warns when the job's LocalQueue does not exist, or when its ClusterQueue can
// never admit what the job asks for, cohort included.
func (v *Validator) adviseQueue(ctx context.Context, tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet) []string {
	name := tj.Labels[trainer.KueueQueueNameLabel]
	if name == "" {
		return nil
	}
	lq := &kueuev1beta2.LocalQueue{}
	err := v.read(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: name}, lq)
	switch {
	case meta.IsNoMatchError(err):
		return nil // Kueue is not installed: nobody reads the label.
	case apierrors.IsNotFound(err):
		return []string{MissingQueueMessage(name, tj.Namespace, v.queueNames(ctx, tj.Namespace))}
	case err != nil:
		log.FromContext(ctx).V(2).Info("Could not read a TrainJob's LocalQueue", "localQueue", name, "err", err)
		return nil
	}
	cq := &kueuev1beta2.ClusterQueue{}
	if err := v.read(ctx, client.ObjectKey{Name: string(lq.Spec.ClusterQueue)}, cq); err != nil {
		return nil // a LocalQueue whose ClusterQueue is missing: Kueue itself says so.
	}
	var members []kueuev1beta2.ClusterQueue
	var cohort *kueuev1beta2.Cohort
	if cq.Spec.CohortName != "" {
		list := &kueuev1beta2.ClusterQueueList{}
		if err := v.client.List(ctx, list); err != nil {
			return nil
		}
		members = list.Items
		c := &kueuev1beta2.Cohort{}
		switch err := v.read(ctx, client.ObjectKey{Name: string(cq.Spec.CohortName)}, c); {
		case err == nil:
			cohort = c
		case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
			return nil
		}
	}
	most, known := kueue.Capacity(cq, members, cohort)
	if !known {
		return nil
	}
	short := kueue.Shortfall(Requests(js), most)
	if len(short) == 0 {
		return nil
	}
	where := "its ClusterQueue " + cq.Name
	if cq.Spec.CohortName != "" {
		where += " (cohort " + string(cq.Spec.CohortName) + " included)"
	}
	return []string{fmt.Sprintf("this job can never be admitted: it asks for %s of %s, which LocalQueue %q feeds: it would wait in the queue forever. Ask for less (fewer nodes or devices per node), or have an admin raise the quota",
		strings.Join(short, ", "), where, name)}
}

// read gets a queue, ClusterQueue or cohort from the cache (a few objects, watched once the
// first job asks), and past it when the cache has none of that name: one created a moment
// before the job is not warned of as missing. Every create of a queued job read them past
// the cache before, a round trip each on the apiserver the create waits for.
func (v *Validator) read(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	err := v.client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && v.live != nil {
		err = v.live.Get(ctx, key, obj)
	}
	return err
}

// MissingQueueMessage says that LocalQueue name does not exist in namespace, naming those
// that do and the closest one.
func MissingQueueMessage(name, namespace string, existing []string) string {
	return fmt.Sprintf("LocalQueue %q does not exist in namespace %s%s: the job waits until it is created. Queues there: %s",
		name, namespace, suggest.DidYouMean(name, existing), suggest.List(existing, maxListed))
}

func (v *Validator) queueNames(ctx context.Context, namespace string) []string {
	list := &kueuev1beta2.LocalQueueList{}
	if err := v.live.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var names []string
	for _, q := range list.Items {
		names = append(names, q.Name)
	}
	return names
}

// Requests is what the job's pods ask for in all, as Kueue counts it: each pod's requests
// (a container's limits where it sets no request), init containers' and sidecars'
// included, times the pods of each replicated job.
func Requests(js *jobsetv1alpha2.JobSet) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, rj := range js.Spec.ReplicatedJobs {
		pods := int64(max(rj.Replicas, 1)) * int64(ptr.Deref(rj.Template.Spec.Parallelism, 1))
		for name, q := range podRequests(&rj.Template.Spec.Template.Spec) {
			q.Mul(pods)
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	return total
}

// podRequests is max(the containers and sidecars together, the largest init container).
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	running := corev1.ResourceList{}
	for _, c := range spec.Containers {
		addTo(running, containerRequests(&c))
	}
	init := corev1.ResourceList{}
	for _, c := range spec.InitContainers {
		if ptr.Deref(c.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways {
			addTo(running, containerRequests(&c))
			continue
		}
		for name, q := range containerRequests(&c) {
			if cur, ok := init[name]; !ok || q.Cmp(cur) > 0 {
				init[name] = q
			}
		}
	}
	for name, q := range init {
		if cur, ok := running[name]; !ok || q.Cmp(cur) > 0 {
			running[name] = q
		}
	}
	return running
}

func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := c.Resources.Requests.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range c.Resources.Limits {
		if _, ok := out[name]; !ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

func addTo(sum corev1.ResourceList, more corev1.ResourceList) {
	for name, q := range more {
		s, ok := sum[name]
		if !ok {
			s = resource.Quantity{Format: q.Format}
		}
		s.Add(q)
		sum[name] = s
	}
}

// reference is an object of the namespace that the job's pods need before they start.
type reference struct {
	kind, name, use string
}

// adviseReferences warns of each PersistentVolumeClaim, Secret and ConfigMap the job's pods
// need (not optional) and the namespace lacks: the pods would wait for it with no word to
// the job's owner. What Kiln creates for the job itself is left out.
func (v *Validator) adviseReferences(ctx context.Context, tj *trainer.TrainJob, res *render.Result) []string {
	ours := map[string]bool{}
	if res.HostfileConfigMap != nil {
		ours["ConfigMap/"+res.HostfileConfigMap.Name] = true
	}
	if res.NeedsSSHSecret {
		ours["Secret/"+render.SSHSecretName(tj)] = true
	}
	var out []string
	for _, ref := range References(res.JobSet) {
		if ours[ref.kind+"/"+ref.name] {
			continue
		}
		var obj client.Object
		switch ref.kind {
		case "PersistentVolumeClaim":
			obj = &corev1.PersistentVolumeClaim{}
		case "Secret":
			obj = &corev1.Secret{}
		default:
			obj = &corev1.ConfigMap{}
		}
		// Only whether it exists matters: a metadata-only read would need a cache of its own.
		err := v.live.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: ref.name}, obj)
		if !apierrors.IsNotFound(err) {
			continue
		}
		out = append(out, fmt.Sprintf("%s %q does not exist in namespace %s: the job's pods (%s) will wait for it and not start. Create it first, or use a runtime that does not need it",
			ref.kind, ref.name, tj.Namespace, ref.use))
	}
	return out
}

// References are the PersistentVolumeClaims, Secrets and ConfigMaps that the JobSet's pods
// cannot start without (optional ones left out), each once, in the order they appear.
func References(js *jobsetv1alpha2.JobSet) []reference {
	var out []reference
	seen := map[string]bool{}
	add := func(kind, name, use string) {
		if name == "" || seen[kind+"/"+name] {
			return
		}
		seen[kind+"/"+name] = true
		out = append(out, reference{kind: kind, name: name, use: use})
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		spec := &rj.Template.Spec.Template.Spec
		for _, vol := range spec.Volumes {
			use := fmt.Sprintf("volume %s of %s", vol.Name, rj.Name)
			switch {
			case vol.PersistentVolumeClaim != nil:
				add("PersistentVolumeClaim", vol.PersistentVolumeClaim.ClaimName, use)
			case vol.Secret != nil && !ptr.Deref(vol.Secret.Optional, false):
				add("Secret", vol.Secret.SecretName, use)
			case vol.ConfigMap != nil && !ptr.Deref(vol.ConfigMap.Optional, false):
				add("ConfigMap", vol.ConfigMap.Name, use)
			case vol.Projected != nil:
				for _, src := range vol.Projected.Sources {
					if s := src.Secret; s != nil && !ptr.Deref(s.Optional, false) {
						add("Secret", s.Name, use)
					}
					if c := src.ConfigMap; c != nil && !ptr.Deref(c.Optional, false) {
						add("ConfigMap", c.Name, use)
					}
				}
			}
		}
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			use := fmt.Sprintf("environment of container %s of %s", c.Name, rj.Name)
			for _, from := range c.EnvFrom {
				if s := from.SecretRef; s != nil && !ptr.Deref(s.Optional, false) {
					add("Secret", s.Name, use)
				}
				if m := from.ConfigMapRef; m != nil && !ptr.Deref(m.Optional, false) {
					add("ConfigMap", m.Name, use)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if s := e.ValueFrom.SecretKeyRef; s != nil && !ptr.Deref(s.Optional, false) {
					add("Secret", s.Name, use)
				}
				if m := e.ValueFrom.ConfigMapKeyRef; m != nil && !ptr.Deref(m.Optional, false) {
					add("ConfigMap", m.Name, use)
				}
			}
		}
	}
	return out
}

// adviseCommand warns when neither the job nor its runtime says what the trainer runs: the
// container then runs whatever its image's entrypoint does, which is seldom training.
func adviseCommand(tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet) []string {
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Template.Labels[trainer.LabelTrainJobAncestor] != trainer.AncestorTrainer {
			continue
		}
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			if c.Name == trainer.NodeName && len(c.Command) == 0 && len(c.Args) == 0 {
				return []string{fmt.Sprintf("no command: neither spec.trainer.command nor runtime %q says what to run, so the trainer runs its image's entrypoint (%s). Set spec.trainer.command (the CLI: kiln submit ... -- COMMAND; the SDKs: the trainer's command)",
					tj.Spec.RuntimeRef.Name, c.Image)}
			}
		}
	}
	return nil
}
