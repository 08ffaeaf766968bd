// Package migrate converts what teams run today into Kiln's kinds: Training Operator v1
// PyTorchJobs (kubeflow.org/v1), batch/v1 Jobs and CronJobs, and manifests written against
// the early TrainJob draft (kubeflow.org/v2alpha1). Each result runs the same workload on a
// catalog runtime. Nothing is dropped silently: what has no place in a TrainJob is either
// carried in a runtime patch or reported as a warning naming the source field.
package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/api/manifest"
)

// Manager is the runtime patches' manager: the converter.
const Manager = "kiln.dev/convert"

// DefaultRuntime is the catalog runtime converted jobs run on unless told otherwise.
const DefaultRuntime = "torch-distributed"

// Options shape a conversion.
type Options struct {
	// Runtime is the ClusterTrainingRuntime the TrainJobs reference (default DefaultRuntime).
	Runtime string
	// Namespace replaces the sources' namespace when set.
	Namespace string
	// RuntimeJobs, when set, lists the replicated Jobs of a ClusterTrainingRuntime (false
	// when there is no such runtime): what a converted job asks of its runtime (dataset and
	// model initializers) is then checked against what the runtime has.
	RuntimeJobs func(name string) ([]string, bool)
}

// Warning is something of a source that did not carry over as it was (or, as a Note, a
// change the conversion made that a reader should know of).
type Warning struct {
	// Note marks what carried over in another form; otherwise something did not carry over.
	Note bool
	// Document is the source's index in the input, from 0.
	Document int
	// Source is "<Kind>/<name>" of the source object.
	Source string
	// Field is the path of the source field, e.g. spec.runPolicy.cleanPodPolicy.
	Field string
	// Message says what happened to it and what to do.
	Message string
}

func (w Warning) String() string {
	return fmt.Sprintf("%s %s: %s", w.Source, w.Field, w.Message)
}

// Result is a conversion's output: one object per source document, in order.
type Result struct {
	Objects []client.Object
	// Sources are the source objects, "<Kind>/<name>", beside Objects.
	Sources  []string
	Warnings []Warning
}

// converter converts one source document.
type converter func(doc []byte, c *conversion) (client.Object, error)

var converters = map[schema.GroupVersionKind]converter{
	{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"}:             convertPyTorchJob,
	{Group: "batch", Version: "v1", Kind: "Job"}:                           convertJob,
	{Group: "batch", Version: "v1", Kind: "CronJob"}:                       convertCronJob,
	{Group: "kubeflow.org", Version: "v2alpha1", Kind: "TrainJob"}:         convertDraft,
	{Group: "trainer.kubeflow.org", Version: "v2alpha1", Kind: "TrainJob"}: convertDraft,
}

// Supported lists the kinds Convert takes, for error messages.
func Supported() []string {
	return []string{"kubeflow.org/v1 PyTorchJob", "batch/v1 Job", "batch/v1 CronJob", "kubeflow.org/v2alpha1 TrainJob"}
}

// conversion is the state of one document's conversion.
type conversion struct {
	opts     Options
	doc      int
	source   string
	warnings []Warning
}

func (c *conversion) warn(field, format string, args ...any) {
	c.warnings = append(c.warnings, Warning{Document: c.doc, Source: c.source, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *conversion) note(field, format string, args ...any) {
	c.warnings = append(c.warnings, Warning{Note: true, Document: c.doc, Source: c.source, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *conversion) runtime() string {
	if c.opts.Runtime != "" {
		return c.opts.Runtime
	}
	return DefaultRuntime
}

// Convert converts every document of data (YAML, several separated by ---, or JSON). A
// document of a kind it does not convert, or that does not decode, fails the whole
// conversion with an error naming the document.
func Convert(data []byte, o Options) (*Result, error) {
	docs, err := manifest.Documents(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("reading the documents: %w", err)
	}
	if len(docs) == 0 {
		return nil, errors.New("no documents to convert")
	}
	res := &Result{}
	for i, doc := range docs {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("document %d: apiVersion %q: %w", i+1, tm.APIVersion, err)
		}
		convert, ok := converters[gv.WithKind(tm.Kind)]
		if !ok {
			return nil, fmt.Errorf("document %d: %s %s %q: not a kind kiln convert takes (it takes %s)",
				i+1, tm.APIVersion, tm.Kind, tm.Metadata.Name, strings.Join(Supported(), ", "))
		}
		c := &conversion{opts: o, doc: i, source: tm.Kind + "/" + tm.Metadata.Name}
		obj, err := convert(doc, c)
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, c.source, err)
		}
		if o.Namespace != "" {
			obj.SetNamespace(o.Namespace)
		}
		res.Objects = append(res.Objects, obj)
		res.Sources = append(res.Sources, c.source)
		res.Warnings = append(res.Warnings, c.warnings...)
	}
	return res, nil
}

// source is a document as a conversion reads it: the kind's spec S under the usual envelope
// (its status is read only so that it is not reported as unknown: it is not carried over).
type source[S any] struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       S                 `json:"spec"`
	Status     map[string]any    `json:"status,omitempty"`
}

// decode reads doc as a source of spec S, noting the fields it does not know; kind names the
// object in the error when it has no name.
func decode[S any](doc []byte, kind string, c *conversion) (*source[S], error) {
	var src source[S]
	if err := unknownFields(doc, &src, c); err != nil {
		return nil, err
	}
	if src.Metadata.Name == "" {
		return nil, fmt.Errorf("metadata.name: a %s needs a name", kind)
	}
	return &src, nil
}

// unknownFields decodes doc into typed strictly: a field the source kind does not have (a
// typo, or a newer version's) is a warning, never silently lost.
func unknownFields(doc []byte, typed any, c *conversion) error {
	if err := yaml.UnmarshalStrict(doc, typed); err == nil {
		return nil
	} else if !strings.Contains(err.Error(), "unknown field") {
		return err
	}
	if err := yaml.Unmarshal(doc, typed); err != nil {
		return err
	}
	// Which ones: every path of the document that the typed value does not keep.
	var raw map[string]any
	if err := yaml.Unmarshal(doc, &raw); err != nil {
		return err
	}
	kept, err := yaml.Marshal(typed)
	if err != nil {
		return err
	}
	var back map[string]any
	if err := yaml.Unmarshal(kept, &back); err != nil {
		return err
	}
	for _, p := range missing(raw, back, "") {
		c.warn(p, "not a field of %s: not carried over", c.source[:strings.Index(c.source, "/")])
	}
	return nil
}

// missing lists the paths of a that b lacks (maps only; a list is compared by its items).
func missing(a, b map[string]any, prefix string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		bv, ok := b[k]
		if !ok {
			if !isZero(a[k]) {
				out = append(out, p)
			}
			continue
		}
		switch av := a[k].(type) {
		case map[string]any:
			if bm, ok := bv.(map[string]any); ok {
				out = append(out, missing(av, bm, p)...)
			}
		case []any:
			if bl, ok := bv.([]any); ok {
				for i := range min(len(av), len(bl)) {
					am, aok := av[i].(map[string]any)
					bm, bok := bl[i].(map[string]any)
					if aok && bok {
						out = append(out, missing(am, bm, fmt.Sprintf("%s[%d]", p, i))...)
					}
				}
			}
		}
	}
	return out
}

func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case float64:
		return v == 0
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// YAML is a converted object as a manifest: what `kubectl apply -f` takes, without the
// empty status a CronTrainJob would otherwise print.
func YAML(obj client.Object) ([]byte, error) {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if st, ok := m["status"].(map[string]any); ok && len(st) == 0 {
		delete(m, "status")
	}
	return yaml.Marshal(m)
}
