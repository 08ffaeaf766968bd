package manifests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestRead(t *testing.T) {
	cases := map[string]struct {
		yaml      string
		wantNames []string
		wantError string
	}{
		"documents in order, empty ones skipped": {
			yaml:      "# Source: queues.yaml\n---\nkind: Queue\napiVersion: hooks.kiln.dev/v1\nmetadata: {name: a}\n---\n{}\n---\nnull\n---\nkind: Queue\napiVersion: hooks.kiln.dev/v1\nmetadata: {name: b}\n",
			wantNames: []string{"a", "b"},
		},
		"nothing": {yaml: "---\n# only a comment\n"},
		"no name": {
			yaml:      "apiVersion: hooks.kiln.dev/v1\nkind: Queue\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\n",
			wantError: "document 2 needs apiVersion, kind and metadata.name",
		},
		"not yaml":      {yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [\n", wantError: "document 2: error converting YAML to JSON"},
		"bad separator": {yaml: "apiVersion: v1\n--- kind: x\n", wantError: "invalid Yaml document separator"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "queues.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, err := Read(path)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) || !strings.HasPrefix(err.Error(), path+": ") {
					t.Fatalf("Read() error = %v, want one naming the file and containing %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read() error: %v", err)
			}
			var names []string
			for _, o := range objs {
				names = append(names, o.GetName())
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("Read() names (-want +got):\n%s", diff)
			}
		})
	}
}

// The pre-delete hook deletes what the manifests made, never a namespace they label.
func TestDeleteKeepsNamespaces(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "queue"}}
	c := fake.NewClientBuilder().WithObjects(ns, cm).Build()
	var objs []*unstructured.Unstructured
	for _, o := range []client.Object{cm, ns} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind(map[bool]string{true: "Namespace", false: "ConfigMap"}[o == client.Object(ns)])
		u.SetNamespace(o.GetNamespace())
		u.SetName(o.GetName())
		objs = append(objs, u)
	}
	if err := Delete(context.Background(), c, objs); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err != nil {
		t.Errorf("the namespace: %v, want it kept", err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap: %v, want it deleted", err)
	}
}
