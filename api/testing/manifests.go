package testing

import (
	"bytes"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/api/manifest"
)

// ReadManifests decodes every object of a multi-document YAML (or JSON) file.
func ReadManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	return DecodeManifests(data)
}

// DecodeManifests decodes every object of a multi-document YAML (or JSON) stream, skipping
// empty documents.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	docs, err := manifest.Documents(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decoding manifests: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, fmt.Errorf("decoding manifest %d: %w", len(objs)+1, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		objs = append(objs, obj)
	}
	return objs, nil
}
