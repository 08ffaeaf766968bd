package kube

// Every read from the shared caches is checked for the caller first.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"

	"github.com/kiln-ml/kiln/apiserver/internal/auth"
)

// Attributes is what a caller wants to do, as RBAC sees it: a verb on a resource, or on a
// non-resource URL Path (then the resource fields are empty).
type Attributes struct {
	Verb, Group, Resource, Subresource, Namespace, Name string
	Path                                                string
}

func (a Attributes) String() string {
	if a.Path != "" {
		return a.Verb + " " + a.Path
	}
	res := a.Resource
	if a.Group != "" {
		res += "." + a.Group
	}
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	where := "cluster-wide"
	if a.Namespace != "" {
		where = "in namespace " + a.Namespace
	}
	return fmt.Sprintf("%s %s %s", a.Verb, res, where)
}

// Authorizer asks Kubernetes whether a caller may do something (SubjectAccessReview), for
// the reads the server answers from its shared caches. Verdicts are cached briefly, as
// kube-apiserver's webhook authorizer does, so that a busy client costs one review per TTL.
// A full cache forgets its least recently used verdict.
type Authorizer struct {
	Client authorizationclient.SubjectAccessReviewInterface
	Clock  clock.PassiveClock
	TTL    time.Duration
	// MaxEntries bounds the memory the cache may take.
	MaxEntries int

	// Made on first use: callers fill the fields in a literal.
	once  sync.Once
	cache *cache.LRUExpireCache
}

type authzKey struct {
	caller string
	attrs  Attributes
}

type authzVerdict struct {
	allowed bool
	reason  string
}

// Allowed reports whether the caller in ctx may do attrs, and Kubernetes' reason when not.
// For one named object, whether the caller may do it to every object of the kind there
// (RBAC rules without resourceNames) is asked first, and covers the name: a caller reading
// many jobs costs one review per TTL, not one per job. Only where that is denied is the
// object's own name asked (rules that list resourceNames).
func (a *Authorizer) Allowed(ctx context.Context, attrs Attributes) (bool, string, error) {
	id := auth.FromContext(ctx)
	if id == nil {
		return false, "", errNoCaller
	}
	if attrs.Name != "" && attrs.Path == "" {
		every := attrs
		every.Name = ""
		if ok, _, err := a.allowed(ctx, id, every); err != nil || ok {
			return ok, "", err
		}
	}
	return a.allowed(ctx, id, attrs)
}

func (a *Authorizer) allowed(ctx context.Context, id *auth.Identity, attrs Attributes) (bool, string, error) {
	a.once.Do(func() {
		// The LRU cache needs a size; a MaxEntries of 0 has always kept one verdict.
		a.cache = cache.NewLRUExpireCacheWithClock(max(a.MaxEntries, 1), a.Clock)
	})
	key := authzKey{caller: id.Key(), attrs: attrs}
	if v, ok := a.cache.Get(key); ok {
		v := v.(authzVerdict)
		return v.allowed, v.reason, nil
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: id.User, UID: id.UID, Groups: id.Groups}}
	if attrs.Path != "" {
		sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: attrs.Path, Verb: attrs.Verb}
	} else {
		sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Verb: attrs.Verb, Group: attrs.Group, Resource: attrs.Resource, Subresource: attrs.Subresource,
			Namespace: attrs.Namespace, Name: attrs.Name,
		}
	}
	if len(id.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(id.Extra))
		for k, vs := range id.Extra {
			sar.Spec.Extra[k] = vs
		}
	}
	res, err := a.Client.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("asking Kubernetes whether %s may %s: %w", id.User, attrs, err)
	}
	v := authzVerdict{allowed: res.Status.Allowed && !res.Status.Denied, reason: res.Status.Reason}
	// A TTL of 0 turns caching off; the LRU cache would answer within the same clock tick.
	if a.TTL > 0 {
		a.cache.Add(key, v, a.TTL)
	}
	return v.allowed, v.reason, nil
}
