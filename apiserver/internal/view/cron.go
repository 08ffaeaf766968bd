package view

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/kiln/schedule"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// NextScheduleTime is when cj's next run falls due after now: zero while it is suspended
// or when its schedule does not parse (its Ready condition says why).
func NextScheduleTime(cj *kiln.CronTrainJob, now time.Time) time.Time {
	if ptr.Deref(cj.Spec.Suspend, false) {
		return time.Time{}
	}
	s, err := schedule.Parse(cj.Spec.Schedule, ptr.Deref(cj.Spec.TimeZone, ""))
	if err != nil {
		return time.Time{}
	}
	return s.Next(now)
}

// CronTrainJob is the API's view of a CronTrainJob at time now.
func CronTrainJob(cj *kiln.CronTrainJob, now time.Time) *kilnv1.CronTrainJob {
	tmpl := &cj.Spec.TrainJobTemplate
	run := &trainer.TrainJob{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	out := &kilnv1.CronTrainJob{
		Name:            cj.Name,
		Namespace:       cj.Namespace,
		Uid:             string(cj.UID),
		ResourceVersion: cj.ResourceVersion,
		CreateTime:      timestamp(&cj.CreationTimestamp),
		Labels:          cj.Labels,
		Annotations:     userAnnotations(cj.Annotations),
		Spec: &kilnv1.CronTrainJobSpec{
			Schedule:                   cj.Spec.Schedule,
			TimeZone:                   ptr.Deref(cj.Spec.TimeZone, ""),
			ConcurrencyPolicy:          concurrencyPolicy(cj.Spec.ConcurrencyPolicy),
			StartingDeadlineSeconds:    cj.Spec.StartingDeadlineSeconds,
			Suspend:                    ptr.Deref(cj.Spec.Suspend, false),
			SuccessfulJobsHistoryLimit: cj.Spec.SuccessfulJobsHistoryLimit,
			FailedJobsHistoryLimit:     cj.Spec.FailedJobsHistoryLimit,
			TrainJob: &kilnv1.TrainJobTemplate{
				Labels: tmpl.Labels, Annotations: tmpl.Annotations, Spec: specOf(run, nil),
			},
		},
		Status: &kilnv1.CronTrainJobStatus{
			LastScheduleTime:   timestamp(cj.Status.LastScheduleTime),
			LastSuccessfulTime: timestamp(cj.Status.LastSuccessfulTime),
			Conditions:         conditions(cj.Status.Conditions),
		},
	}
	for _, a := range cj.Status.Active {
		out.Status.Active = append(out.Status.Active, a.Name)
	}
	if next := NextScheduleTime(cj, now); !next.IsZero() {
		out.Status.NextScheduleTime = timestamppb.New(next)
	}
	return out
}

// concurrencyPolicy is the API's name of a CronTrainJob's concurrency policy (Allow when
// unset).
func concurrencyPolicy(p kiln.ConcurrencyPolicy) kilnv1.ConcurrencyPolicy {
	switch p {
	case kiln.ForbidConcurrent:
		return kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID
	case kiln.ReplaceConcurrent:
		return kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_REPLACE
	}
	return kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_ALLOW
}
