package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/api/manifest"
	"github.com/kiln-ml/kiln/api/testing/pinned"
)

// upstreamDir is the pinned Kubeflow Trainer module (tools/trainer), the reference for
// wire compatibility.
func upstreamDir(t *testing.T) string {
	t.Helper()
	dir, err := pinned.ModuleDir("trainer", "github.com/kubeflow/trainer/v2")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// stripDescriptions removes every "description" so that schemas compare by shape.
func stripDescriptions(v any) any {
	switch o := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range o {
			if k != "description" {
				out[k] = stripDescriptions(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(o))
		for i := range o {
			out[i] = stripDescriptions(o[i])
		}
		return out
	}
	return v
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCRDsMatchUpstream proves the generated CRDs equal Kubeflow Trainer v2.3's, field for
// field, except for the KEP-2899 additions.
func TestCRDsMatchUpstream(t *testing.T) {
	up := upstreamDir(t)
	schemaProps := func(crd map[string]any) map[string]any {
		versions := crd["spec"].(map[string]any)["versions"].([]any)
		return versions[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)
	}
	cases := map[string]struct {
		removeFromOurs func(props map[string]any)
	}{
		"trainer.kubeflow.org_trainjobs.yaml": {removeFromOurs: func(p map[string]any) {
			delete(p["spec"].(map[string]any)["properties"].(map[string]any), "ttlSecondsAfterFinished")
			status := p["status"].(map[string]any)["properties"].(map[string]any)
			delete(status, "startTime")
			delete(status, "completionTime")
			delete(status, "restarts") // the group restarts of the runtime's failure policy (docs/fault-tolerance.md)
		}},
		"trainer.kubeflow.org_trainingruntimes.yaml": {removeFromOurs: func(p map[string]any) {
			spec := p["spec"].(map[string]any)
			delete(spec["properties"].(map[string]any), "runPolicy")
			delete(spec, "x-kubernetes-validations")
		}},
		"trainer.kubeflow.org_clustertrainingruntimes.yaml": {removeFromOurs: func(p map[string]any) {
			spec := p["spec"].(map[string]any)
			delete(spec["properties"].(map[string]any), "runPolicy")
			delete(spec, "x-kubernetes-validations")
		}},
	}
	for file, tc := range cases {
		t.Run(file, func(t *testing.T) {
			theirs := stripDescriptions(readYAML(t, filepath.Join(up, "manifests", "base", "crds", file))).(map[string]any)
			ours := stripDescriptions(readYAML(t, filepath.Join("..", "..", "config", "crd", file))).(map[string]any)
			tc.removeFromOurs(schemaProps(ours))
			// Printer columns only change what kubectl prints; Kiln's State column is truthful.
			for _, crd := range []map[string]any{theirs, ours} {
				for _, v := range crd["spec"].(map[string]any)["versions"].([]any) {
					delete(v.(map[string]any), "additionalPrinterColumns")
				}
			}
			delete(theirs["metadata"].(map[string]any), "annotations")
			delete(ours["metadata"].(map[string]any), "annotations")
			if diff := cmp.Diff(theirs, ours); diff != "" {
				t.Errorf("CRD differs from Kubeflow Trainer v2.3 beyond the KEP-2899 fields and status.restarts (-upstream +ours):\n%s", diff)
			}
		})
	}
}

// TestUpstreamManifestsRoundTrip decodes every runtime and example manifest of Kubeflow
// Trainer v2.3 into Kiln's types, rejecting unknown fields, and encodes it back unchanged.
func TestUpstreamManifestsRoundTrip(t *testing.T) {
	up := upstreamDir(t)
	var files []string
	for _, root := range []string{filepath.Join(up, "manifests", "base", "runtimes"), filepath.Join(up, "examples", "yaml")} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") && filepath.Base(path) != "kustomization.yaml" {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 8 {
		t.Fatalf("found only %d upstream manifests under %s", len(files), up)
	}
	seen := 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := manifest.Documents(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, d := range docs {
			var doc map[string]any
			if err := yaml.Unmarshal(d, &doc); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			var obj any
			switch doc["kind"] {
			case TrainJobKind:
				obj = &TrainJob{}
			case TrainingRuntimeKind:
				obj = &TrainingRuntime{}
			case ClusterTrainingRuntimeKind:
				obj = &ClusterTrainingRuntime{}
			default:
				continue
			}
			seen++
			name := strings.TrimPrefix(path, up+"/")
			t.Run(name, func(t *testing.T) {
				raw, err := json.Marshal(doc)
				if err != nil {
					t.Fatal(err)
				}
				strict := json.NewDecoder(bytes.NewReader(raw))
				strict.DisallowUnknownFields()
				if err := strict.Decode(obj); err != nil {
					t.Fatalf("decoding into Kiln's types: %v", err)
				}
				back, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				var got map[string]any
				if err := json.Unmarshal(back, &got); err != nil {
					t.Fatal(err)
				}
				// Go's encoding of embedded Kubernetes types writes empty objects such as
				// `metadata: {}` and `resources: {}`; they carry no data.
				if diff := cmp.Diff(pruneEmpty(doc), pruneEmpty(got)); diff != "" {
					t.Errorf("round trip lost or changed data (-upstream +ours):\n%s", diff)
				}
			})
		}
	}
	t.Logf("round-tripped %d TrainJobs and runtimes from %d files", seen, len(files))
}

// pruneEmpty drops empty objects, recursively, and writes resource quantities in their
// canonical form (`2` and "2" are the same quantity; the apiserver stores "2").
func pruneEmpty(v any) any { return normalize(v, "") }

func normalize(v any, parent string) any {
	switch o := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range o {
			if parent == "limits" || parent == "requests" {
				q := resource.MustParse(fmt.Sprint(val))
				out[k] = q.String()
				continue
			}
			val = normalize(val, k)
			if m, ok := val.(map[string]any); ok && len(m) == 0 {
				continue
			}
			out[k] = val
		}
		return out
	case []any:
		out := make([]any, len(o))
		for i := range o {
			out[i] = normalize(o[i], parent)
		}
		return out
	}
	return v
}
