package request

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	"github.com/kiln-ml/kiln/api/manifest"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// MaxManifestBytes bounds a manifest, as Kubernetes bounds an object (about 1.5 MiB in etcd).
const MaxManifestBytes = 1 << 20

// ParseManifest reads one TrainJob from YAML or JSON, strictly: an unknown or misspelled
// field is an error that names it, never silently dropped. Status is ignored.
func ParseManifest(manifest string, path *field.Path) (*trainer.TrainJob, field.ErrorList) {
	tj := &trainer.TrainJob{}
	if errs := decodeManifest(manifest, path, trainer.GroupVersion.String(), trainer.TrainJobKind, tj); len(errs) > 0 {
		return nil, errs
	}
	tj.Status = trainer.TrainJobStatus{}
	clearServerFields(&tj.ObjectMeta)
	return tj, nil
}

// ParseCronManifest reads one CronTrainJob from YAML or JSON, as ParseManifest reads a TrainJob.
func ParseCronManifest(manifest string, path *field.Path) (*kiln.CronTrainJob, field.ErrorList) {
	cj := &kiln.CronTrainJob{}
	if errs := decodeManifest(manifest, path, kiln.GroupVersion.String(), kiln.CronTrainJobKind, cj); len(errs) > 0 {
		return nil, errs
	}
	cj.Status = kiln.CronTrainJobStatus{}
	clearServerFields(&cj.ObjectMeta)
	return cj, nil
}

// decodeManifest decodes one object of apiVersion and kind into obj, strictly.
func decodeManifest(manifest string, path *field.Path, apiVersion, kind string, obj any) field.ErrorList {
	if len(manifest) > MaxManifestBytes {
		return field.ErrorList{field.TooLong(path, "", MaxManifestBytes)}
	}
	if strings.TrimSpace(manifest) == "" {
		return field.ErrorList{field.Required(path, fmt.Sprintf("a %s in YAML or JSON", kind))}
	}
	docs, err := countDocuments(manifest)
	if err != nil {
		return field.ErrorList{field.Invalid(path, "", "not YAML or JSON: "+err.Error())}
	}
	if docs > 1 {
		return field.ErrorList{field.Invalid(path, "", fmt.Sprintf("holds %d YAML documents: send one %s per request", docs, kind))}
	}
	head := struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}{}
	if err := yaml.Unmarshal([]byte(manifest), &head); err != nil {
		return field.ErrorList{field.Invalid(path, "", "not YAML or JSON: "+err.Error())}
	}
	if head.APIVersion != apiVersion || head.Kind != kind {
		return field.ErrorList{field.Invalid(path, "", fmt.Sprintf("is apiVersion %q kind %q: want apiVersion %s kind %s",
			head.APIVersion, head.Kind, apiVersion, kind))}
	}
	data, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		return field.ErrorList{field.Invalid(path, "", "not YAML or JSON: "+err.Error())}
	}
	// Strict, with the path of every unknown or duplicate field, as kubectl reports them.
	strict, err := sigsjson.UnmarshalStrict(data, obj)
	if err != nil {
		return field.ErrorList{field.Invalid(path, "", fmt.Sprintf("not a valid %s: %v", kind, err))}
	}
	var errs field.ErrorList
	for _, e := range strict {
		errs = append(errs, field.Invalid(path, "", e.Error()+": remove or correct it"))
	}
	return errs
}

// clearServerFields drops what only the server sets.
func clearServerFields(m *metav1.ObjectMeta) {
	m.ResourceVersion, m.UID = "", ""
	m.CreationTimestamp.Reset()
	m.ManagedFields = nil
}

// countDocuments counts the YAML documents of s that hold something besides comments.
func countDocuments(s string) (int, error) {
	docs, err := manifest.Documents(strings.NewReader(s))
	return len(docs), err
}
