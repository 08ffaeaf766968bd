// Package webhook holds the TrainJob admission webhooks: a defaulter that stamps runtime
// patches with the time they changed and a new job with its runtime version's hash (the
// snapshot it is pinned to), and a validator whose messages name the field and the fix.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	"github.com/kiln-ml/kiln/api/suggest"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/render"
)

// The webhook configurations, generated from these markers into config/webhook by
// `make generate` (one source for the local platform, the tests and the chart). The apiserver
// calls mutating webhooks in the order of their configurations' names, so the defaulter's is
// named to come after Kueue's (kueue-mutating-webhook-configuration): it sees the runtime patch
// Kueue's webhook appends to every TrainJob and stamps its time in the same call. Were it
// first, Kueue's change would make the apiserver call it again (reinvocationPolicy IfNeeded,
// kept for webhooks named after it): three calls per create instead of two.
// +kubebuilder:webhookconfiguration:mutating=true,name=trainjob-defaulter.kiln.dev
// +kubebuilder:webhookconfiguration:mutating=false,name=kiln-trainjob-validator
// +kubebuilder:webhook:path=/mutate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=true,failurePolicy=fail,sideEffects=None,reinvocationPolicy=IfNeeded,groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;update,versions=v1alpha1,name=defaulter.trainjob.kiln.dev,admissionReviewVersions=v1,timeoutSeconds=10,serviceName=kiln-webhook,serviceNamespace=kiln-system
// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;update,versions=v1alpha1,name=validator.trainjob.kiln.dev,admissionReviewVersions=v1,timeoutSeconds=10,serviceName=kiln-webhook,serviceNamespace=kiln-system

// Paths the webhooks are served at (the same as Kubeflow Trainer's).
const (
	MutatePath   = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
	ValidatePath = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
)

// DefaultPreservingUsers are the clients known to write TrainJobs with Kubeflow Trainer's Go
// types, which lack Kiln's fields: Kueue's controller.
var DefaultPreservingUsers = []string{"system:serviceaccount:kueue-system:kueue-controller-manager"}

// Setup registers the TrainJob webhooks with the manager's webhook server. Updates by
// preserveFor keep the Kiln-only fields they cannot express.
func Setup(mgr ctrl.Manager, clk clock.PassiveClock, preserveFor []string) error {
	srv := mgr.GetWebhookServer()
	srv.Register(MutatePath, &admission.Webhook{
		Handler:      schemaFirst{next: newDefaulting(mgr.GetScheme(), &Defaulter{clock: clk, preserveFor: preserveFor, runtimes: mgr.GetClient()})},
		RecoverPanic: ptr.To(true),
	})
	who := &callers{c: mgr.GetClient()}
	validator := admission.WithValidator[*trainer.TrainJob](mgr.GetScheme(), &Validator{client: mgr.GetClient(), live: mgr.GetAPIReader(), callers: who})
	validator.RecoverPanic = ptr.To(true)
	srv.Register(ValidatePath, validator)
	cron := admission.WithValidator[*kiln.CronTrainJob](mgr.GetScheme(), &CronValidator{jobs: &Validator{client: mgr.GetClient(), live: mgr.GetAPIReader(), callers: who}})
	cron.RecoverPanic = ptr.To(true)
	srv.Register(CronValidatePath, cron)
	return nil
}

// schemaFirst lets through, unchanged, a TrainJob that does not decode into Kiln's types
// (a quantity like "eight", a string where a number goes): mutating webhooks run before
// the apiserver's schema validation, which then refuses the object naming the field (say
// spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]), where a decoding error names none.
// Nothing undecodable gets in: the validating webhook runs after the schema's checks.
// The defaulting handler answers 400 when, and only when, the object does not decode.
type schemaFirst struct {
	next admission.Handler
}

func (h schemaFirst) Handle(ctx context.Context, req admission.Request) admission.Response {
	res := h.next.Handle(ctx, req)
	if !res.Allowed && res.Result != nil && res.Result.Code == http.StatusBadRequest {
		return admission.Allowed("not decodable; left to the apiserver's schema validation")
	}
	return res
}

// Defaulter stamps each runtime patch with the time it last changed and a new job with the
// hash of its runtime (pinning.go), and keeps Kiln's own fields when a client that does not
// know them rewrites the TrainJob.
type Defaulter struct {
	clock       clock.PassiveClock
	preserveFor []string
	// runtimes reads a new job's runtime, for the annotations it passes on and its hash.
	runtimes client.Reader
	hashes   snapshotHashes
}

// Default sets runtimePatches[].time on new or changed patches, keeping it on unchanged ones.
func (d *Defaulter) Default(ctx context.Context, tj *trainer.TrainJob) error {
	old := map[string]trainer.RuntimePatch{}
	req, reqErr := admission.RequestFromContext(ctx)
	if reqErr == nil && len(req.OldObject.Raw) == 0 {
		rt, spec := d.runtimeOf(ctx, tj)
		inheritProgressDeadline(rt, tj)
		d.stampSnapshot(tj, rt, spec)
	}
	if reqErr == nil && len(req.OldObject.Raw) > 0 {
		prev := &trainer.TrainJob{}
		if err := json.Unmarshal(req.OldObject.Raw, prev); err != nil {
			return fmt.Errorf("decoding the TrainJob before the update: %w", err)
		}
		for _, p := range prev.Spec.RuntimePatches {
			old[p.Manager] = p
		}
		keepSnapshotStamp(prev, tj)
		// Kueue updates TrainJobs with upstream's Go types, whose encoding drops
		// spec.ttlSecondsAfterFinished; such a write never means "remove the TTL".
		if slices.Contains(d.preserveFor, req.UserInfo.Username) {
			if tj.Spec.TTLSecondsAfterFinished == nil {
				tj.Spec.TTLSecondsAfterFinished = prev.Spec.TTLSecondsAfterFinished
			}
			keepOthersPatches(tj, old)
		}
	}
	now := metav1.NewTime(d.clock.Now().Truncate(1e9))
	for i := range tj.Spec.RuntimePatches {
		p := &tj.Spec.RuntimePatches[i]
		prev, ok := old[p.Manager]
		if ok && apiequality.Semantic.DeepEqual(prev.TrainingRuntimeSpec, p.TrainingRuntimeSpec) {
			p.Time = prev.Time
			continue
		}
		if !ok && p.Time != nil {
			continue
		}
		p.Time = &now
	}
	return nil
}

// kueueManagerPrefix prefixes the runtime patch managers of Kueue's own patches.
const kueueManagerPrefix = "kueue.x-k8s.io/"

// keepOthersPatches restores, on a rewrite by Kueue, the other managers' runtime patches as
// they were: Kueue writes the whole TrainJob with upstream's Go types, whose encoding drops
// the PodSpecPatch fields they lack (terminationGracePeriodSeconds in the version Kueue
// builds with). Dropped, such a field changes the JobSet's pod template at admission, which
// JobSet refuses, failing the job for good. Kueue only ever changes its own patch.
func keepOthersPatches(tj *trainer.TrainJob, old map[string]trainer.RuntimePatch) {
	for i := range tj.Spec.RuntimePatches {
		p := &tj.Spec.RuntimePatches[i]
		if prev, ok := old[p.Manager]; ok && !strings.HasPrefix(p.Manager, kueueManagerPrefix) {
			p.TrainingRuntimeSpec = prev.TrainingRuntimeSpec.DeepCopy()
		}
	}
}

// Validator rejects TrainJobs that can never run as written.
type Validator struct {
	client client.Reader
	// live reads past the cache: a runtime created a moment before its first job (one
	// kubectl apply of both) may not be in the cache yet.
	live client.Reader
	// callers asks the apiserver what a caller may do (nil: nothing is asked).
	callers *callers
}

// ValidateCreate checks a new TrainJob against its runtime.
func (v *Validator) ValidateCreate(ctx context.Context, tj *trainer.TrainJob) (admission.Warnings, error) {
	errs := append(validateSize(tj), validateProgressDeadline(tj)...)
	rt, rtErrs := v.runtime(ctx, tj)
	errs = append(errs, rtErrs...)
	if rt != nil {
		errs = append(errs, validateAgainstRuntime(tj, rt)...)
	}
	var warnings admission.Warnings
	if rt != nil && len(errs) == 0 {
		var res *render.Result
		if res, errs = validateRendering(tj, rt); res != nil && len(errs) == 0 {
			if errs = append(v.validatePodSecurity(ctx, tj, res.JobSet), v.validateServiceAccount(ctx, tj, res.JobSet)...); len(errs) == 0 {
				warnings = v.advise(ctx, tj, res)
			}
		}
	}
	return warnings, toInvalid(tj, errs)
}

// ValidateUpdate also keeps runtime patches from changing under running pods.
func (v *Validator) ValidateUpdate(ctx context.Context, old, tj *trainer.TrainJob) (admission.Warnings, error) {
	// spec.trainer and spec.runtimeRef are immutable (CEL): only the patches can change
	// what the job renders to.
	var errs field.ErrorList
	if old.Annotations[kiln.AnnotationProgressDeadline] != tj.Annotations[kiln.AnnotationProgressDeadline] {
		errs = append(errs, validateProgressDeadline(tj)...)
	}
	if !apiequality.Semantic.DeepEqual(withoutTimes(old.Spec.RuntimePatches), withoutTimes(tj.Spec.RuntimePatches)) &&
		!ptr.Deref(old.Spec.Suspend, false) && !ptr.Deref(tj.Spec.Suspend, false) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "runtimePatches"),
			"may change only while the TrainJob is suspended: set spec.suspend to true first (or in the same update)"))
	}
	if len(errs) == 0 && !apiequality.Semantic.DeepEqual(old.Spec.RuntimePatches, tj.Spec.RuntimePatches) {
		if rt, rtErrs := v.runtime(ctx, tj); rt != nil {
			errs = append(errs, validatePatches(tj, rt)...)
			if len(errs) == 0 {
				var res *render.Result
				if res, errs = validateRendering(tj, rt); res != nil && len(errs) == 0 {
					errs = append(v.validatePodSecurity(ctx, tj, res.JobSet), v.validateServiceAccount(ctx, tj, res.JobSet)...)
				}
			}
		} else {
			errs = append(errs, rtErrs...)
		}
	}
	return nil, toInvalid(tj, errs)
}

// ValidateDelete allows every deletion.
func (v *Validator) ValidateDelete(context.Context, *trainer.TrainJob) (admission.Warnings, error) {
	return nil, nil
}

func withoutTimes(ps []trainer.RuntimePatch) []trainer.RuntimePatch {
	out := make([]trainer.RuntimePatch, len(ps))
	for i, p := range ps {
		out[i] = *p.DeepCopy()
		out[i].Time = nil
	}
	return out
}

func toInvalid(tj *trainer.TrainJob, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(trainer.GroupVersion.WithKind(trainer.TrainJobKind).GroupKind(), tj.Name, errs)
}

// runtime reads the referenced runtime's spec.
func (v *Validator) runtime(ctx context.Context, tj *trainer.TrainJob) (*trainer.TrainingRuntimeSpec, field.ErrorList) {
	ref := field.NewPath("spec", "runtimeRef")
	kind := ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)
	if g := ptr.Deref(tj.Spec.RuntimeRef.APIGroup, trainer.GroupVersion.Group); g != trainer.GroupVersion.Group {
		return nil, field.ErrorList{field.NotSupported(ref.Child("apiGroup"), g, []string{trainer.GroupVersion.Group})}
	}
	if kind != trainer.ClusterTrainingRuntimeKind && kind != trainer.TrainingRuntimeKind {
		return nil, field.ErrorList{field.NotSupported(ref.Child("kind"), kind, []string{trainer.ClusterTrainingRuntimeKind, trainer.TrainingRuntimeKind})}
	}
	spec, err := getRuntime(ctx, v.client, kind, tj)
	if apierrors.IsNotFound(err) && v.live != nil {
		// Not in the cache: ask the apiserver before refusing, the cache may be behind.
		spec, err = getRuntime(ctx, v.live, kind, tj)
	}
	if apierrors.IsNotFound(err) {
		where := ""
		if kind == trainer.TrainingRuntimeKind {
			where = " in namespace " + tj.Namespace
		}
		return nil, field.ErrorList{field.Invalid(ref.Child("name"), tj.Spec.RuntimeRef.Name, fmt.Sprintf(
			"%s %q not found%s%s: create the runtime first, or name an existing one (kubectl get clustertrainingruntimes,trainingruntimes -A)",
			kind, tj.Spec.RuntimeRef.Name, where, suggest.DidYouMean(tj.Spec.RuntimeRef.Name, runtimeNames(ctx, v.client, kind, tj.Namespace))))}
	}
	if err != nil {
		return nil, field.ErrorList{field.InternalError(ref, fmt.Errorf("reading the runtime: %w", err))}
	}
	return &spec, nil
}

// runtimeNames are the names of the runtimes of kind (in namespace, for TrainingRuntimes).
func runtimeNames(ctx context.Context, r client.Reader, kind, namespace string) []string {
	var names []string
	if kind == trainer.ClusterTrainingRuntimeKind {
		list := &trainer.ClusterTrainingRuntimeList{}
		if err := r.List(ctx, list); err != nil {
			return nil
		}
		for _, rt := range list.Items {
			names = append(names, rt.Name)
		}
		return names
	}
	list := &trainer.TrainingRuntimeList{}
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	for _, rt := range list.Items {
		names = append(names, rt.Name)
	}
	return names
}

// getRuntime reads the spec of the runtime of kind that tj references, through r.
func getRuntime(ctx context.Context, r client.Reader, kind string, tj *trainer.TrainJob) (trainer.TrainingRuntimeSpec, error) {
	if kind == trainer.ClusterTrainingRuntimeKind {
		rt := &trainer.ClusterTrainingRuntime{}
		err := r.Get(ctx, client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, rt)
		return rt.Spec, err
	}
	rt := &trainer.TrainingRuntime{}
	err := r.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: tj.Spec.RuntimeRef.Name}, rt)
	return rt.Spec, err
}

func validateAgainstRuntime(tj *trainer.TrainJob, rt *trainer.TrainingRuntimeSpec) field.ErrorList {
	var errs field.ErrorList
	if t := tj.Spec.Trainer; t != nil && rt.MLPolicy != nil {
		var reserved []string
		var framework string
		switch {
		case rt.MLPolicy.Torch != nil:
			reserved, framework = render.TorchEnv, "torch"
		case rt.MLPolicy.MPI != nil:
			reserved, framework = render.MPIEnv, "MPI"
		case rt.MLPolicy.XGBoost != nil:
			reserved, framework = render.XGBoostEnv, "XGBoost"
		}
		for i, e := range t.Env {
			if slices.Contains(reserved, e.Name) {
				errs = append(errs, field.Forbidden(field.NewPath("spec", "trainer", "env").Index(i).Child("name"),
					fmt.Sprintf("%s is set by Kiln for %s runtimes: remove it (use spec.trainer.numNodes and spec.trainer.numProcPerNode to size the job)", e.Name, framework)))
			}
		}
	}
	if in := tj.Spec.Initializer; in != nil {
		for _, step := range []struct {
			set      bool
			ancestor string
			path     *field.Path
		}{
			{in.Dataset != nil, trainer.AncestorDatasetInitializer, field.NewPath("spec", "initializer", "dataset")},
			{in.Model != nil, trainer.AncestorModelInitializer, field.NewPath("spec", "initializer", "model")},
		} {
			if step.set && !hasAncestor(rt, step.ancestor) {
				errs = append(errs, field.Invalid(step.path, "", fmt.Sprintf(
					"runtime %q has no %s job: remove this initializer, or use a runtime that has one", tj.Spec.RuntimeRef.Name, step.ancestor)))
			}
		}
	}
	return append(errs, validatePatches(tj, rt)...)
}

func hasAncestor(rt *trainer.TrainingRuntimeSpec, ancestor string) bool {
	for _, rj := range rt.Template.Spec.ReplicatedJobs {
		if rj.Template.Labels[trainer.LabelTrainJobAncestor] == ancestor {
			return true
		}
	}
	return false
}

// validatePatches checks that every patch names a real manager and real jobs and containers.
func validatePatches(tj *trainer.TrainJob, rt *trainer.TrainingRuntimeSpec) field.ErrorList {
	var errs field.ErrorList
	for i, p := range tj.Spec.RuntimePatches {
		path := field.NewPath("spec", "runtimePatches").Index(i)
		for _, msg := range validation.IsDomainPrefixedPath(field.NewPath(""), p.Manager) {
			errs = append(errs, field.Invalid(path.Child("manager"), p.Manager, msg.Detail+": name the manager like example.com/team"))
		}
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil || p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		for j, rjp := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			rjPath := path.Child("trainingRuntimeSpec", "template", "spec", "replicatedJobs").Index(j)
			idx := slices.IndexFunc(rt.Template.Spec.ReplicatedJobs, func(rj jobsetv1alpha2.ReplicatedJob) bool { return rj.Name == rjp.Name })
			if idx < 0 {
				errs = append(errs, field.NotFound(rjPath.Child("name"), fmt.Sprintf("%s (the runtime's replicated jobs are %v)", rjp.Name, jobNames(rt))))
				continue
			}
			if rjp.Template == nil || rjp.Template.Spec == nil || rjp.Template.Spec.Template == nil || rjp.Template.Spec.Template.Spec == nil {
				continue
			}
			pod := rt.Template.Spec.ReplicatedJobs[idx].Template.Spec.Template.Spec
			podPath := rjPath.Child("template", "spec", "template", "spec")
			for k, c := range rjp.Template.Spec.Template.Spec.Containers {
				if !slices.ContainsFunc(pod.Containers, func(rc corev1.Container) bool { return rc.Name == c.Name }) {
					errs = append(errs, field.NotFound(podPath.Child("containers").Index(k).Child("name"), fmt.Sprintf("%s (job %s has no such container)", c.Name, rjp.Name)))
				}
			}
			for k, c := range rjp.Template.Spec.Template.Spec.InitContainers {
				if !slices.ContainsFunc(pod.InitContainers, func(rc corev1.Container) bool { return rc.Name == c.Name }) {
					errs = append(errs, field.NotFound(podPath.Child("initContainers").Index(k).Child("name"), fmt.Sprintf("%s (job %s has no such init container)", c.Name, rjp.Name)))
				}
			}
		}
	}
	return errs
}

func jobNames(rt *trainer.TrainingRuntimeSpec) []string {
	var out []string
	for _, rj := range rt.Template.Spec.ReplicatedJobs {
		out = append(out, rj.Name)
	}
	return out
}
