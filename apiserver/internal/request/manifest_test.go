package request

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

const seed = `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: my-trainjob
  namespace: my-namespace
spec:
  activeDeadlineSeconds: 3600
  runtimeRef:
    name: torch-distributed
  trainer:
    image: docker.io/my-training-image:latest
    command: [torchrun, train.py]
status:
  conditions: [{type: Complete, status: "True", reason: x, message: done, lastTransitionTime: "2026-01-01T00:00:00Z"}]
`

func TestParseManifest(t *testing.T) {
	tj, errs := ParseManifest("---\n# a comment\n"+seed, field.NewPath("manifest"))
	if len(errs) > 0 {
		t.Fatalf("ParseManifest() errors: %v", errs)
	}
	if tj.Name != "my-trainjob" || tj.Namespace != "my-namespace" || *tj.Spec.ActiveDeadlineSeconds != 3600 || len(tj.Status.Conditions) != 0 {
		t.Errorf("ParseManifest() = %+v", tj)
	}
	if _, errs := ParseManifest(seed+"---\n# the end\n---\n", field.NewPath("manifest")); len(errs) > 0 {
		t.Errorf("ParseManifest(trailing comment) errors: %v", errs)
	}
	json := `{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"j"},"spec":{"runtimeRef":{"name":"r"}}}`
	if _, errs := ParseManifest(json, field.NewPath("manifest")); len(errs) > 0 {
		t.Errorf("ParseManifest(JSON) errors: %v", errs)
	}
}

func TestParseManifestErrors(t *testing.T) {
	cases := map[string]struct {
		manifest string
		want     string
	}{
		"empty":           {"  \n", "Required"},
		"two documents":   {seed + "---\n" + seed, "2 YAML documents"},
		"a null document": {seed + "---\nnull\n", "2 YAML documents"},
		"a bad separator": {seed + "--- x\n", "invalid Yaml document separator"},
		"another kind":    {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", `want apiVersion trainer.kubeflow.org/v1alpha1 kind TrainJob`},
		"unknown field":   {strings.Replace(seed, "runtimeRef:", "runtimeRefs:", 1), `unknown field "spec.runtimeRefs"`},
		"wrong type":      {strings.Replace(seed, "3600", "soon", 1), "activeDeadlineSeconds"},
		"not yaml":        {"{{{", "not YAML or JSON"},
		"too big":         {strings.Repeat("#", MaxManifestBytes+1), "may not be more than"},
		"old apiVersion":  {strings.Replace(seed, "v1alpha1", "v1", 1), "want apiVersion"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := ParseManifest(tc.manifest, field.NewPath("manifest"))
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Errorf("ParseManifest() errors = %v, want one mentioning %q", errs, tc.want)
			}
			if len(errs) > 0 && errs[0].Field != "manifest" {
				t.Errorf("error names field %q, want manifest", errs[0].Field)
			}
		})
	}
}

// FuzzParseManifest: any input gives a TrainJob or field errors on "manifest"; never a
// panic, never both.
func FuzzParseManifest(f *testing.F) {
	f.Add(seed)
	f.Add(`{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"j"}}`)
	f.Add("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n---\n")
	f.Add("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nspec: {trainer: {numNodes: -1e99}}\n")
	f.Fuzz(func(t *testing.T, manifest string) {
		tj, errs := ParseManifest(manifest, field.NewPath("manifest"))
		if (tj == nil) == (len(errs) == 0) {
			t.Fatalf("ParseManifest(%q) = %v, %v: want exactly one of a job and errors", manifest, tj, errs)
		}
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "manifest") {
				t.Fatalf("error on field %q: %v", e.Field, e)
			}
		}
		if tj != nil && len(tj.Status.Conditions) > 0 {
			t.Fatalf("status kept: %v", tj.Status)
		}
	})
}
