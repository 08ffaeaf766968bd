package webhook

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// A TrainJob's pods run as a ServiceAccount, and whoever picks it gets its rights: with a
// runtime patch (or a runtime of the namespace) a user with no pod rights could run as the
// namespace's most powerful ServiceAccount. Kubernetes lets only those who may create pods
// in a namespace run pods as any of its ServiceAccounts; Kiln holds TrainJobs to the same
// rule: a ServiceAccount that the job or a namespaced runtime chooses is refused unless the
// caller may create pods there. A ClusterTrainingRuntime's is an admin's choice. The
// operator's own creates (a schedule's runs) were judged when their schedule was written.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// callers answers whether the user of an admission request may create pods in a namespace,
// and who the operator itself is.
type callers struct {
	c    client.Client
	mu   sync.Mutex
	self string
}

// operator is the operator's own user name, asked once it is needed (again after a failure).
func (c *callers) operator(ctx context.Context) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.self == "" {
		review := &authenticationv1.SelfSubjectReview{}
		if err := c.c.Create(ctx, review); err == nil {
			c.self = review.Status.UserInfo.Username
		}
	}
	return c.self
}

func (c *callers) mayCreatePods(ctx context.Context, u authenticationv1.UserInfo, namespace string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "create", Resource: "pods"},
	}}
	if err := c.c.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

// chosenServiceAccounts are the ServiceAccounts of the JobSet's pods that the TrainJob
// chose, by replicated job: those its runtime patches set, and all but "default" when its
// runtime is the namespace's own.
func chosenServiceAccounts(tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet) map[string]string {
	patched := map[string]bool{}
	for _, p := range tj.Spec.RuntimePatches {
		if strings.HasPrefix(p.Manager, kueueManagerPrefix) || p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil ||
			p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		for _, r := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			if r.Template != nil && r.Template.Spec != nil && r.Template.Spec.Template != nil && r.Template.Spec.Template.Spec != nil &&
				r.Template.Spec.Template.Spec.ServiceAccountName != nil {
				patched[r.Name] = true
			}
		}
	}
	namespaced := ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind) == trainer.TrainingRuntimeKind
	out := map[string]string{}
	for _, rj := range js.Spec.ReplicatedJobs {
		sa := rj.Template.Spec.Template.Spec.ServiceAccountName
		if sa != "" && sa != "default" && (patched[rj.Name] || namespaced) {
			out[rj.Name] = sa
		}
	}
	return out
}

// validateServiceAccount refuses a TrainJob whose pods would run as a ServiceAccount it
// chose when the caller may not create pods in its namespace, naming where it is set.
func (v *Validator) validateServiceAccount(ctx context.Context, tj *trainer.TrainJob, js *jobsetv1alpha2.JobSet) field.ErrorList {
	chosen := chosenServiceAccounts(tj, js)
	if len(chosen) == 0 || v.callers == nil {
		return nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil // not an admission request: nobody to judge
	}
	if self := v.callers.operator(ctx); self != "" && req.UserInfo.Username == self {
		return nil
	}
	allowed, err := v.callers.mayCreatePods(ctx, req.UserInfo, tj.Namespace)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec", "runtimePatches"), fmt.Errorf("asking whether %s may create pods: %w", req.UserInfo.Username, err))}
	}
	if allowed {
		return nil
	}
	var errs field.ErrorList
	for _, rj := range slices.Sorted(maps.Keys(chosen)) {
		path, by := patchOf(tj, rj)
		errs = append(errs, field.Forbidden(path, fmt.Sprintf(
			"%s runs replicated job %q's pods as ServiceAccount %q, which %s may not choose: only those who may create pods in namespace %s may run pods as its ServiceAccounts. "+
				"Remove serviceAccountName to run as the runtime's, or have an admin set it on a ClusterTrainingRuntime",
			by, rj, chosen[rj], req.UserInfo.Username, tj.Namespace)))
	}
	return errs
}
