// Package crds installs and upgrades the trainer.kubeflow.org CRDs the operator is built
// with. The Helm chart installs them from its crds/ directory, which Helm never upgrades;
// its pre-upgrade hook runs `kiln-operator --apply-crds`, so a new field reaches the cluster
// before the operator that needs it (kubeflow/trainer#3650).
package crds

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"golang.org/x/mod/semver"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/api/config/crd"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
)

// FieldManager owns the CRDs' fields the operator applies.
const FieldManager = "kiln-operator"

// Read returns the embedded CRDs.
func Read() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(crd.Files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		data, err := crd.Files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, c); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Base(n), err)
		}
		c.APIVersion, c.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRDs embedded (run `make generate`)")
	}
	return out, nil
}

// Options of Apply.
type Options struct {
	// Version is the Kiln version applying (the operator's); a release's vX.Y.Z is
	// compared with the one that applied the CRDs before, a development build's is not.
	Version string
	// AllowDowngrade applies these CRDs over newer ones anyway.
	AllowDowngrade bool
}

// Downgrade says why CRDs that a newer Kiln applied (applied, a version of
// kiln.AnnotationCRDsVersion) must not be replaced by those of version, or "" when they may be.
func Downgrade(name, applied, version string) string {
	if !semver.IsValid(applied) || !semver.IsValid(version) || semver.Compare(applied, version) <= 0 {
		return ""
	}
	return fmt.Sprintf("CRD %s was applied by Kiln %s, newer than this operator's %s: its older schema would drop the newer fields "+
		"(and the API server would prune them from every stored object). Downgrade with the newer CRDs kept: "+
		"helm upgrade/rollback with --set crds.upgrade=false; or replace them anyway with kiln-operator --apply-crds --allow-crd-downgrade",
		name, applied, version)
}

// Apply server-side applies every CRD (taking over the fields other managers, such as
// Helm, set), recording opts.Version on each, and waits until each is Established. It
// refuses, changing nothing, when a newer Kiln applied any of them (see Downgrade).
func Apply(ctx context.Context, c client.Client, timeout time.Duration, opts Options) error {
	crds, err := Read()
	if err != nil {
		return err
	}
	if !opts.AllowDowngrade {
		for _, want := range crds {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: want.Name}, got); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("reading CRD %s: %w", want.Name, err)
			}
			if why := Downgrade(want.Name, got.Annotations[kiln.AnnotationCRDsVersion], opts.Version); why != "" {
				return errors.New(why)
			}
		}
	}
	for _, want := range crds {
		if opts.Version != "" {
			if want.Annotations == nil {
				want.Annotations = map[string]string{}
			}
			want.Annotations[kiln.AnnotationCRDsVersion] = opts.Version
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying CRD %s: %w", want.Name, err)
		}
	}
	for _, want := range crds {
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: want.Name}, got); err != nil {
				return false, nil //nolint:nilerr // retried until the timeout
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s is not Established: %w", want.Name, err)
		}
	}
	return nil
}
