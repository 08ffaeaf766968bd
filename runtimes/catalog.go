// Package runtimes is Kiln's runtime catalog: the ClusterTrainingRuntimes that `make up`,
// the tests and the Helm chart install. The YAML under catalog/ is the one source.
package runtimes

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"sigs.k8s.io/yaml"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

//go:embed catalog/*.yaml
var catalogFS embed.FS

// Files returns the catalog's manifests by file name, as written.
func Files() (map[string][]byte, error) {
	entries, err := fs.Glob(catalogFS, "catalog/*.yaml")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range entries {
		data, err := catalogFS.ReadFile(e)
		if err != nil {
			return nil, err
		}
		out[path.Base(e)] = data
	}
	return out, nil
}

// ClusterTrainingRuntimes decodes the catalog strictly (an unknown field is an error),
// sorted by name.
func ClusterTrainingRuntimes() ([]*trainer.ClusterTrainingRuntime, error) {
	files, err := Files()
	if err != nil {
		return nil, err
	}
	var out []*trainer.ClusterTrainingRuntime
	for name, data := range files {
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("catalog/%s: %w", name, err)
		}
		rt := &trainer.ClusterTrainingRuntime{}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(rt); err != nil {
			return nil, fmt.Errorf("catalog/%s: %w", name, err)
		}
		if rt.Kind != trainer.ClusterTrainingRuntimeKind || rt.APIVersion != trainer.GroupVersion.String() {
			return nil, fmt.Errorf("catalog/%s: want a %s %s, got %s %s", name, trainer.GroupVersion, trainer.ClusterTrainingRuntimeKind, rt.APIVersion, rt.Kind)
		}
		if want := rt.Name + ".yaml"; name != want {
			return nil, fmt.Errorf("catalog/%s: file name must be %s, after the runtime", name, want)
		}
		out = append(out, rt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ClusterTrainingRuntime is the catalog's runtime of that name.
func ClusterTrainingRuntime(name string) (*trainer.ClusterTrainingRuntime, error) {
	rts, err := ClusterTrainingRuntimes()
	if err != nil {
		return nil, err
	}
	for _, rt := range rts {
		if rt.Name == name {
			return rt, nil
		}
	}
	return nil, fmt.Errorf("no runtime %q in the catalog", name)
}
