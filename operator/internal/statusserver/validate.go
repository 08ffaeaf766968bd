package statusserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// decode reads an UpdateTrainJobStatusRequest. Fields it does not know are ignored, as
// upstream's server ignores them (a newer client may send more), and returned so that the
// answer can warn about them: a misspelt field is not silently lost. Names match exactly,
// as the apiserver matches them ("TRAINERSTATUS" is an unknown field, not trainerStatus).
func decode(body []byte) (*trainer.UpdateTrainJobStatusRequest, []string, error) {
	req := &trainer.UpdateTrainJobStatusRequest{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return nil, nil, fmt.Errorf("%s: Invalid value: a JSON %s: must be a %s", typeErr.Field, typeErr.Value, typeErr.Type)
		}
		return nil, nil, fmt.Errorf("the body is not an UpdateTrainJobStatusRequest (JSON like {\"trainerStatus\": {\"progressPercentage\": 42}}): %w", err)
	}
	return req, unknownFields(body), nil
}

// unknownFields lists the fields of body that an UpdateTrainJobStatusRequest does not have.
func unknownFields(body []byte) []string {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	var out []string
	extra := func(path string, obj any, known ...string) {
		m, _ := obj.(map[string]any)
		for k := range m {
			if !slices.Contains(known, k) {
				out = append(out, path+k)
			}
		}
	}
	extra("", doc, "trainerStatus")
	extra("trainerStatus.", doc["trainerStatus"], "progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")
	if ts, ok := doc["trainerStatus"].(map[string]any); ok {
		ms, _ := ts["metrics"].([]any)
		for i, m := range ms {
			extra(fmt.Sprintf("trainerStatus.metrics[%d].", i), m, "name", "value")
		}
	}
	slices.Sort(out)
	return out
}

// validate checks a trainer status against the limits its CRD enforces, naming each field
// that breaks one, so that nothing the apiserver would refuse is accepted.
func validate(ts *trainer.TrainerStatus) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("trainerStatus")
	if v := ts.ProgressPercentage; v != nil && (*v < 0 || *v > 100) {
		errs = append(errs, field.Invalid(p.Child("progressPercentage"), *v, "must be between 0 and 100"))
	}
	if v := ts.EstimatedRemainingSeconds; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(p.Child("estimatedRemainingSeconds"), *v, "must be 0 or more"))
	}
	if n := len(ts.Metrics); n > trainer.MaxTrainerMetrics {
		errs = append(errs, field.TooMany(p.Child("metrics"), n, trainer.MaxTrainerMetrics))
		return errs
	}
	for i, m := range ts.Metrics {
		mp := p.Child("metrics").Index(i)
		for _, f := range []struct{ name, value string }{{"name", m.Name}, {"value", m.Value}} {
			switch n := utf8.RuneCountInString(f.value); {
			case n == 0:
				errs = append(errs, field.Required(mp.Child(f.name), "must not be empty"))
			case n > trainer.MaxMetricFieldLength:
				errs = append(errs, field.TooLong(mp.Child(f.name), f.value, trainer.MaxMetricFieldLength))
			}
		}
	}
	return errs
}
