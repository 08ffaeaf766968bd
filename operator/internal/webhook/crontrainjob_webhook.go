package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kiln-ml/kiln/api/kiln/schedule"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
)

// Served in the validating configuration of the TrainJob validator (kiln-trainjob-validator),
// whose CA bundle the operator already manages.
// +kubebuilder:webhook:path=/validate-kiln-dev-v1alpha1-crontrainjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=kiln.dev,resources=crontrainjobs,verbs=create;update,versions=v1alpha1,name=validator.crontrainjob.kiln.dev,admissionReviewVersions=v1,timeoutSeconds=10,serviceName=kiln-webhook,serviceNamespace=kiln-system

// CronValidatePath is where the CronTrainJob validator is served.
const CronValidatePath = "/validate-kiln-dev-v1alpha1-crontrainjob"

// CronValidator refuses a CronTrainJob whose schedule cannot parse, whose time zone is
// unknown, or whose runs would be refused as TrainJobs: each run is checked as the
// TrainJob validator checks one (its runtime, its size, the names JobSet derives from its
// name, its rendering), with the field paths moved under spec.trainJobTemplate.
type CronValidator struct {
	jobs *Validator
}

// ValidateCreate implements admission.Validator.
// A new schedule is told what its runs will be told (a missing queue, a claim that does not
// exist): they are created later, by the operator, where nobody reads a warning.
func (v *CronValidator) ValidateCreate(ctx context.Context, cj *kiln.CronTrainJob) (admission.Warnings, error) {
	warnings, err := v.validate(ctx, cj)
	for i, w := range warnings {
		warnings[i] = "its runs: " + w
	}
	return warnings, err
}

// ValidateUpdate implements admission.Validator.
func (v *CronValidator) ValidateUpdate(ctx context.Context, _, cj *kiln.CronTrainJob) (admission.Warnings, error) {
	_, err := v.validate(ctx, cj)
	return nil, err
}

// ValidateDelete allows every deletion.
func (v *CronValidator) ValidateDelete(context.Context, *kiln.CronTrainJob) (admission.Warnings, error) {
	return nil, nil
}

func (v *CronValidator) validate(ctx context.Context, cj *kiln.CronTrainJob) (admission.Warnings, error) {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	tz := ptr.Deref(cj.Spec.TimeZone, "")
	if _, err := schedule.Parse("@daily", tz); err != nil {
		errs = append(errs, field.Invalid(spec.Child("timeZone"), tz, err.Error()))
	} else if _, err := schedule.Parse(cj.Spec.Schedule, tz); err != nil {
		errs = append(errs, field.Invalid(spec.Child("schedule"), cj.Spec.Schedule, err.Error()))
	}
	// A run as it will be created, at a time far enough ahead for its name to be as long as
	// any run's in this century.
	run := cj.NewRun(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	warnings, err := v.jobs.ValidateCreate(ctx, run)
	if err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) || status.Status().Details == nil {
			return nil, err
		}
		for _, c := range status.Status().Details.Causes {
			errs = append(errs, templateError(cj, c.Field, c.Message))
		}
	}
	if len(errs) == 0 {
		return warnings, nil
	}
	return nil, apierrors.NewInvalid(kiln.GroupVersion.WithKind(kiln.CronTrainJobKind).GroupKind(), cj.Name, errs)
}

// templateError moves a run's field error to where the user wrote it: the run's name is
// the CronTrainJob's name plus its scheduled minute; its spec is the template's.
func templateError(cj *kiln.CronTrainJob, path, msg string) *field.Error {
	switch {
	case path == "metadata.name" || path == "metadata.generateName":
		return field.Invalid(field.NewPath("metadata", "name"), cj.Name, fmt.Sprintf(
			"its runs are named %s-<minute of the scheduled time, 8 digits>, %d characters longer: %s", cj.Name, kiln.RunNameSuffixLength, msg))
	case strings.HasPrefix(path, "spec."):
		return &field.Error{Type: field.ErrorTypeInvalid, Field: "spec.trainJobTemplate." + path, BadValue: field.OmitValueType{}, Detail: msg}
	case strings.HasPrefix(path, "metadata."):
		return &field.Error{Type: field.ErrorTypeInvalid, Field: "spec.trainJobTemplate." + path, BadValue: field.OmitValueType{}, Detail: msg}
	}
	return &field.Error{Type: field.ErrorTypeInvalid, Field: "spec.trainJobTemplate", BadValue: field.OmitValueType{}, Detail: msg}
}
