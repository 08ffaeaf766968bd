package convert

import (
	"bufio"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// MaxManifestBytes bounds a manifest, as Kubernetes bounds an object (about 1.5 MiB in etcd).
const MaxManifestBytes = 1 << 20

// ParseManifest reads one TrainJob from YAML or JSON, strictly: an unknown or misspelled
// field is an error that names it, never silently dropped. Status is ignored.
func ParseManifest(manifest string, path *field.Path) (*trainer.TrainJob, field.ErrorList) {
	if len(manifest) > MaxManifestBytes {
		return nil, field.ErrorList{field.TooLong(path, "", MaxManifestBytes)}
	}
	if strings.TrimSpace(manifest) == "" {
		return nil, field.ErrorList{field.Required(path, "a TrainJob in YAML or JSON")}
	}
	if docs := countDocuments(manifest); docs > 1 {
		return nil, field.ErrorList{field.Invalid(path, "", fmt.Sprintf("holds %d YAML documents: send one TrainJob per request", docs))}
	}
	head := struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}{}
	if err := yaml.Unmarshal([]byte(manifest), &head); err != nil {
		return nil, field.ErrorList{field.Invalid(path, "", "not YAML or JSON: "+err.Error())}
	}
	if head.APIVersion != trainer.GroupVersion.String() || head.Kind != "TrainJob" {
		return nil, field.ErrorList{field.Invalid(path, "", fmt.Sprintf("is apiVersion %q kind %q: want apiVersion %s kind TrainJob",
			head.APIVersion, head.Kind, trainer.GroupVersion))}
	}
	data, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		return nil, field.ErrorList{field.Invalid(path, "", "not YAML or JSON: "+err.Error())}
	}
	tj := &trainer.TrainJob{}
	// Strict, with the path of every unknown or duplicate field, as kubectl reports them.
	strict, err := sigsjson.UnmarshalStrict(data, tj)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(path, "", "not a valid TrainJob: "+err.Error())}
	}
	if len(strict) > 0 {
		var errs field.ErrorList
		for _, e := range strict {
			errs = append(errs, field.Invalid(path, "", e.Error()+": remove or correct it"))
		}
		return nil, errs
	}
	tj.Status = trainer.TrainJobStatus{}
	tj.ResourceVersion, tj.UID = "", ""
	tj.CreationTimestamp.Reset()
	tj.ManagedFields = nil
	return tj, nil
}

// countDocuments counts the YAML documents of s that hold something besides comments.
func countDocuments(s string) int {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	n := 0
	for {
		doc, err := r.Read()
		if err != nil { // io.EOF, or a document too long to be read: the decoder reports it
			return n
		}
		var v any
		if yaml.Unmarshal(doc, &v) == nil && v == nil {
			continue
		}
		n++
	}
}
