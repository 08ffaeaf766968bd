package request

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/kiln/schedule"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// policies map the API's concurrency policies to the CronTrainJob's.
var policies = map[kilnv1.ConcurrencyPolicy]kiln.ConcurrencyPolicy{
	kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_UNSPECIFIED: kiln.AllowConcurrent,
	kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_ALLOW:       kiln.AllowConcurrent,
	kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID:      kiln.ForbidConcurrent,
	kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_REPLACE:     kiln.ReplaceConcurrent,
}

// NewCronTrainJob builds the CronTrainJob that in describes, or says which fields are
// wrong and how. Paths start at path (e.g. "cron_train_job").
func NewCronTrainJob(namespace string, in *kilnv1.NewCronTrainJob, path *field.Path) (*kiln.CronTrainJob, field.ErrorList) {
	var errs field.ErrorList
	cj := &kiln.CronTrainJob{
		TypeMeta: metav1.TypeMeta{APIVersion: kiln.GroupVersion.String(), Kind: kiln.CronTrainJobKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: in.GetName(), Namespace: namespace,
			Labels: copyMap(in.GetLabels()), Annotations: copyMap(in.GetAnnotations()),
		},
	}
	if in.GetName() == "" {
		errs = append(errs, field.Required(path.Child("name"), "the CronTrainJob's name; its runs are named <name>-<scheduled minute>"))
	} else {
		errs = append(errs, ValidateName(path.Child("name"), in.GetName())...)
	}
	errs = append(errs, metav1validation.ValidateLabels(in.GetLabels(), path.Child("labels"))...)
	spec, sp := in.GetSpec(), path.Child("spec")
	if spec == nil {
		return nil, append(errs, field.Required(sp, "the schedule and the TrainJob of each run"))
	}
	s := &cj.Spec
	s.Schedule = spec.GetSchedule()
	if spec.GetTimeZone() != "" {
		s.TimeZone = ptr.To(spec.GetTimeZone())
	}
	errs = append(errs, ValidateSchedule(sp.Child("schedule"), sp.Child("time_zone"), spec.GetSchedule(), spec.GetTimeZone())...)
	policy, ok := policies[spec.GetConcurrencyPolicy()]
	if !ok {
		errs = append(errs, field.NotSupported(sp.Child("concurrency_policy"), spec.GetConcurrencyPolicy().String(),
			[]string{"CONCURRENCY_POLICY_ALLOW", "CONCURRENCY_POLICY_FORBID", "CONCURRENCY_POLICY_REPLACE"}))
	}
	s.ConcurrencyPolicy = policy
	if d := spec.StartingDeadlineSeconds; d != nil {
		if *d < 0 {
			errs = append(errs, field.Invalid(sp.Child("starting_deadline_seconds"), *d, "must be at least 0 (seconds); leave it unset to start a late run however late"))
		}
		s.StartingDeadlineSeconds = ptr.To(*d)
	}
	s.Suspend = ptr.To(spec.GetSuspend())
	for _, l := range []struct {
		value *int32
		into  **int32
		field string
	}{
		{spec.SuccessfulJobsHistoryLimit, &s.SuccessfulJobsHistoryLimit, "successful_jobs_history_limit"},
		{spec.FailedJobsHistoryLimit, &s.FailedJobsHistoryLimit, "failed_jobs_history_limit"},
	} {
		if l.value == nil {
			continue
		}
		if *l.value < 0 {
			errs = append(errs, field.Invalid(sp.Child(l.field), *l.value, "must be at least 0 (runs to keep); leave it unset for the default"))
		}
		*l.into = ptr.To(*l.value)
	}
	tp := sp.Child("train_job")
	tmpl := spec.GetTrainJob()
	if tmpl.GetSpec() == nil {
		return nil, append(errs, field.Required(tp.Child("spec"), "the TrainJob of each run: at least its runtime"))
	}
	errs = append(errs, metav1validation.ValidateLabels(tmpl.GetLabels(), tp.Child("labels"))...)
	run := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Labels: copyMap(tmpl.GetLabels()), Annotations: copyMap(tmpl.GetAnnotations())}}
	errs = append(errs, applySpec(run, tmpl.GetSpec(), tp.Child("spec"))...)
	if len(errs) > 0 {
		return nil, errs
	}
	s.TrainJobTemplate = kiln.TrainJobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: run.Labels, Annotations: run.Annotations},
		Spec:       run.Spec,
	}
	return cj, nil
}

// ValidateSchedule checks a schedule and its time zone as the operator will read them.
func ValidateSchedule(schedulePath, timeZonePath *field.Path, expr, timeZone string) field.ErrorList {
	if _, err := schedule.Parse("@daily", timeZone); err != nil {
		return field.ErrorList{field.Invalid(timeZonePath, timeZone, err.Error())}
	}
	if expr == "" {
		return field.ErrorList{field.Required(schedulePath, `a cron expression, e.g. "0 2 * * 0" (Sundays at 02:00), or @daily`)}
	}
	if _, err := schedule.Parse(expr, timeZone); err != nil {
		return field.ErrorList{field.Invalid(schedulePath, expr, err.Error())}
	}
	return nil
}
