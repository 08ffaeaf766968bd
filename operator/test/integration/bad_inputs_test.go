package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
)

const (
	annotationWant = "test.kiln.dev/want"
	annotationFix  = "test.kiln.dev/fix"
)

var _ = Describe("Bad inputs", func() {
	It("are each refused at creation, naming the field (and the fix), leaving nothing behind", func(ctx context.Context) {
		docs, err := kilntesting.ReadManifests(filepath.Join("testdata", "bad-inputs.yaml"))
		Expect(err).NotTo(HaveOccurred())
		ns := newNamespace(ctx)
		namespacedTorchRuntime(ctx, ns, "torch")
		n := 0
		var failures []string
		for _, u := range docs {
			n++
			want, fix := u.GetAnnotations()[annotationWant], u.GetAnnotations()[annotationFix]
			Expect(want).NotTo(BeEmpty(), "document %d (%s) says which field it must be refused on", n, u.GetName())
			u.SetNamespace(ns)
			// Strict, as kubectl sends: an unknown field is an error, not silently dropped.
			err := k8s.Create(ctx, u, client.FieldValidation("Strict"))
			switch {
			case err == nil:
				failures = append(failures, fmt.Sprintf("%s %s was accepted", u.GetKind(), u.GetName()))
				continue
			case !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err):
				failures = append(failures, fmt.Sprintf("%s: want Invalid or BadRequest, got %v", u.GetName(), err))
			case !strings.Contains(err.Error(), want):
				failures = append(failures, fmt.Sprintf("%s: the error does not name %s: %v", u.GetName(), want, err))
			case !strings.Contains(err.Error(), fix):
				failures = append(failures, fmt.Sprintf("%s: the error does not say %q: %v", u.GetName(), fix, err))
			}
			got := u.NewEmptyInstance().(*unstructured.Unstructured)
			if k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: u.GetName()}, got) == nil {
				failures = append(failures, fmt.Sprintf("%s was left behind", u.GetName()))
			}
		}
		Expect(failures).To(BeEmpty())
		Expect(n).To(BeNumerically(">=", 50), "the corpus holds at least 50 bad inputs")
	})
})
