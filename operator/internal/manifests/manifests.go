// Package manifests applies and deletes objects whose kinds another component installs: the
// Helm chart's default Kueue queues. Helm cannot create them in the release that installs
// Kueue (its CRDs are templates of that release, kueue#7334), so the chart's hooks run
// `kiln-operator --apply-manifests` after install and upgrade, and `--delete-manifests`
// before uninstall. Applying waits for what a fresh install has not finished: the kinds
// being served and their admission webhooks answering.
package manifests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/api/manifest"
)

// FieldManager owns the fields the hooks apply.
const FieldManager = "kiln-chart-hooks"

// Read decodes the YAML documents of file.
func Read(file string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	docs, err := manifest.Documents(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var objs []*unstructured.Unstructured
	for i, doc := range docs {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &o.Object); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		if len(o.Object) == 0 {
			continue
		}
		if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d needs apiVersion, kind and metadata.name", file, i+1)
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// Apply server-side applies objs in order, each retried every interval until timeout while
// its kind is not served yet or the apiserver cannot reach a webhook; any other refusal
// (an invalid object) fails at once.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, interval, timeout time.Duration) error {
	logger := log.FromContext(ctx)
	for _, o := range objs {
		var last error
		err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
			last = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(FieldManager), client.ForceOwnership)
			switch {
			case last == nil:
				return true, nil
			case Retriable(last):
				logger.Info("Waiting to apply", "kind", o.GetKind(), "name", o.GetName(), "reason", last.Error())
				return false, nil
			default:
				return false, last
			}
		})
		if err != nil {
			if last != nil {
				err = last
			}
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), describe(o), err)
		}
		logger.Info("Applied", "kind", o.GetKind(), "name", describe(o))
	}
	return nil
}

// Delete deletes objs in reverse order; objects or kinds that are gone are no error. A
// Namespace is kept: the manifests only label one, which is the cluster's.
func Delete(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	var errs []error
	for i := len(objs) - 1; i >= 0; i-- {
		if objs[i].GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
			continue
		}
		err := c.Delete(ctx, objs[i].DeepCopy())
		if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			errs = append(errs, fmt.Errorf("deleting %s %s: %w", objs[i].GetKind(), describe(objs[i]), err))
		}
	}
	return errors.Join(errs...)
}

// Retriable tells the errors of an install still settling: the kind not served yet, or an
// admission webhook not answering (its pod is starting, or its certificate not injected).
func Retriable(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err)
}

func describe(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

// Disaggregate removes the aggregationRule of the named ClusterRoles (missing ones are no
// error), so that Kubernetes' aggregation controller leaves them alone. Deleted together with
// the roles they aggregate, as `helm uninstall` deletes Kueue's, they can be created again by
// that controller, which server-side applies an aggregated role's rules from a cache that
// may still hold it: `helm uninstall --wait` then waits on them until its timeout, and the
// next `helm install` fails on them.
func Disaggregate(ctx context.Context, c client.Client, names []string) error {
	var errs []error
	for _, name := range names {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
		err := c.Patch(ctx, role, client.RawPatch(types.MergePatchType, []byte(`{"aggregationRule":null}`)))
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing the aggregationRule of ClusterRole %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
