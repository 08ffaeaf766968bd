package kiln

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// ConcurrencyPolicy says what happens when a run falls due while an earlier one is still
// active (queued in Kueue, suspended or running): "Allow", "Forbid" or "Replace".
type ConcurrencyPolicy string

// The concurrency policies, with CronJob's meaning.
const (
	Allow   ConcurrencyPolicy = "Allow"
	Forbid  ConcurrencyPolicy = "Forbid"
	Replace ConcurrencyPolicy = "Replace"
)

var policyOf = map[ConcurrencyPolicy]kilnv1.ConcurrencyPolicy{
	Allow:   kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_ALLOW,
	Forbid:  kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID,
	Replace: kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_REPLACE,
}

// ScheduleOptions is a schedule to create: a CronTrainJob (kiln.dev/v1alpha1) that creates
// a TrainJob, a run, at each scheduled time.
type ScheduleOptions struct {
	Name string
	// Schedule is a cron expression, e.g. "0 2 * * 0" (Sundays at 02:00), or @daily etc.;
	// TimeZone an IANA name (empty: UTC).
	Schedule, TimeZone string
	// ConcurrencyPolicy defaults to Allow.
	ConcurrencyPolicy ConcurrencyPolicy
	// StartingDeadlineSeconds skips a run that could not start that long after its time.
	StartingDeadlineSeconds *int64
	// History limits: completed runs kept (nil: 3), failed runs kept (nil: 1).
	SuccessfulJobsHistoryLimit, FailedJobsHistoryLimit *int32
	Suspend                                            bool
	Labels, Annotations                                map[string]string
	Namespace                                          string
	// Run is the TrainJob of each run; its Name, GenerateName, Namespace and RequestID are
	// not used (runs are named after the schedule and their scheduled time). Its
	// ActiveDeadlineSeconds bounds each run.
	Run TrainOptions
	// RequestID makes retries safe (random when empty).
	RequestID string
}

// Schedule is a CronTrainJob and what it did.
type Schedule struct {
	Name, Namespace            string
	Schedule, TimeZone         string
	ConcurrencyPolicy          ConcurrencyPolicy
	Suspend                    bool
	StartingDeadlineSeconds    *int64
	SuccessfulJobsHistoryLimit *int32
	FailedJobsHistoryLimit     *int32
	// Runtime, Image, NumNodes, Queue and ActiveDeadlineSeconds are those of each run.
	Runtime, Image        string
	NumNodes              int32
	Queue                 string
	ActiveDeadlineSeconds *int64
	// Active names the runs that have not finished.
	Active []string
	// LastScheduleTime, LastSuccessfulTime and NextScheduleTime (nil while suspended) are nil when unset.
	LastScheduleTime, LastSuccessfulTime, NextScheduleTime *time.Time
	CreationTimestamp                                      time.Time
	Labels                                                 map[string]string
	// Raw is the API's message.
	Raw *kilnv1.CronTrainJob
}

func scheduleOf(s *kilnv1.CronTrainJob) *Schedule {
	spec, st := s.GetSpec(), s.GetStatus()
	run := spec.GetTrainJob().GetSpec()
	out := &Schedule{
		Name: s.GetName(), Namespace: s.GetNamespace(), Schedule: spec.GetSchedule(), TimeZone: spec.GetTimeZone(),
		ConcurrencyPolicy: Allow, Suspend: spec.GetSuspend(), StartingDeadlineSeconds: spec.StartingDeadlineSeconds,
		SuccessfulJobsHistoryLimit: spec.SuccessfulJobsHistoryLimit, FailedJobsHistoryLimit: spec.FailedJobsHistoryLimit,
		Runtime: run.GetRuntime(), Image: run.GetImage(), NumNodes: run.GetNodes(), Queue: run.GetQueue(),
		ActiveDeadlineSeconds: run.ActiveDeadlineSeconds, Active: st.GetActive(),
		LastScheduleTime:   timeOf(st.GetLastScheduleTime(), st.GetLastScheduleTime() != nil),
		LastSuccessfulTime: timeOf(st.GetLastSuccessfulTime(), st.GetLastSuccessfulTime() != nil),
		NextScheduleTime:   timeOf(st.GetNextScheduleTime(), st.GetNextScheduleTime() != nil),
		CreationTimestamp:  s.GetCreateTime().AsTime(), Labels: maps.Clone(s.GetLabels()), Raw: s,
	}
	for name, p := range policyOf {
		if p == spec.GetConcurrencyPolicy() {
			out.ConcurrencyPolicy = name
		}
	}
	return out
}

// CreateSchedule creates a schedule. It retries while the server is unavailable, with the
// same request id, so a lost answer never creates it twice.
func (c *Client) CreateSchedule(ctx context.Context, o ScheduleOptions) (*Schedule, error) {
	policy := kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_ALLOW
	if o.ConcurrencyPolicy != "" {
		var ok bool
		for name, p := range policyOf {
			if strings.EqualFold(string(name), string(o.ConcurrencyPolicy)) {
				policy, ok = p, true
			}
		}
		if !ok {
			return nil, fmt.Errorf("ScheduleOptions.ConcurrencyPolicy: %q: want Allow, Forbid or Replace", o.ConcurrencyPolicy)
		}
	}
	spec, err := o.Run.spec("ScheduleOptions.Run")
	if err != nil {
		return nil, err
	}
	req := &kilnv1.CreateCronTrainJobRequest{
		Namespace: c.ns(o.Namespace), RequestId: requestID(o.RequestID),
		Source: &kilnv1.CreateCronTrainJobRequest_CronTrainJob{CronTrainJob: &kilnv1.NewCronTrainJob{
			Name: o.Name, Labels: o.Labels, Annotations: o.Annotations,
			Spec: &kilnv1.CronTrainJobSpec{
				Schedule: o.Schedule, TimeZone: o.TimeZone, ConcurrencyPolicy: policy,
				StartingDeadlineSeconds: o.StartingDeadlineSeconds, Suspend: o.Suspend,
				SuccessfulJobsHistoryLimit: o.SuccessfulJobsHistoryLimit, FailedJobsHistoryLimit: o.FailedJobsHistoryLimit,
				TrainJob: &kilnv1.TrainJobTemplate{Labels: o.Run.Labels, Annotations: o.Run.Annotations, Spec: spec},
			},
		}},
	}
	var res *connect.Response[kilnv1.CreateCronTrainJobResponse]
	err = retry(ctx, func() (err error) {
		res, err = c.Schedules.CreateCronTrainJob(ctx, connect.NewRequest(req))
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	c.warnAll(res.Msg.GetWarnings())
	return scheduleOf(res.Msg.GetCronTrainJob()), nil
}

// ListSchedules lists schedules, ordered by namespace and name.
func (c *Client) ListSchedules(ctx context.Context, o ListOptions) ([]*Schedule, error) {
	if len(o.Statuses) > 0 {
		return nil, fmt.Errorf("ListOptions.Statuses: schedules have no status to select by; leave it empty")
	}
	var res *connect.Response[kilnv1.ListCronTrainJobsResponse]
	err := retry(ctx, func() (err error) {
		res, err = c.Schedules.ListCronTrainJobs(ctx, connect.NewRequest(&kilnv1.ListCronTrainJobsRequest{
			Namespace: c.ns(o.Namespace), AllNamespaces: o.AllNamespaces, LabelSelector: o.LabelSelector,
		}))
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	var out []*Schedule
	for _, s := range res.Msg.GetCronTrainJobs() {
		out = append(out, scheduleOf(s))
	}
	return out, nil
}

// GetSchedule returns one schedule; namespace "" is the client's.
func (c *Client) GetSchedule(ctx context.Context, namespace, name string) (*Schedule, error) {
	var res *connect.Response[kilnv1.GetCronTrainJobResponse]
	err := retry(ctx, func() (err error) {
		res, err = c.Schedules.GetCronTrainJob(ctx, connect.NewRequest(&kilnv1.GetCronTrainJobRequest{Namespace: c.ns(namespace), Name: name}))
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	return scheduleOf(res.Msg.GetCronTrainJob()), nil
}

// SuspendSchedule stops new runs; runs already created go on.
func (c *Client) SuspendSchedule(ctx context.Context, namespace, name string) (*Schedule, error) {
	res, err := c.Schedules.SuspendCronTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendCronTrainJobRequest{Namespace: c.ns(namespace), Name: name}))
	if err != nil {
		return nil, wrap(err)
	}
	return scheduleOf(res.Msg.GetCronTrainJob()), nil
}

// ResumeSchedule creates runs again.
func (c *Client) ResumeSchedule(ctx context.Context, namespace, name string) (*Schedule, error) {
	res, err := c.Schedules.ResumeCronTrainJob(ctx, connect.NewRequest(&kilnv1.ResumeCronTrainJobRequest{Namespace: c.ns(namespace), Name: name}))
	if err != nil {
		return nil, wrap(err)
	}
	return scheduleOf(res.Msg.GetCronTrainJob()), nil
}

// TriggerSchedule creates a run now and returns its name. It retries with one request id,
// so a lost answer never creates a second run.
func (c *Client) TriggerSchedule(ctx context.Context, namespace, name string) (string, error) {
	req := &kilnv1.TriggerCronTrainJobRequest{Namespace: c.ns(namespace), Name: name, RequestId: requestID("")}
	var res *connect.Response[kilnv1.TriggerCronTrainJobResponse]
	err := retry(ctx, func() (err error) {
		res, err = c.Schedules.TriggerCronTrainJob(ctx, connect.NewRequest(req))
		return err
	})
	if err != nil {
		return "", wrap(err)
	}
	return res.Msg.GetTrainJob().GetName(), nil
}

// DeleteSchedule deletes a schedule and, unless keepRuns, its runs.
func (c *Client) DeleteSchedule(ctx context.Context, namespace, name string, keepRuns bool) error {
	_, err := c.Schedules.DeleteCronTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteCronTrainJobRequest{Namespace: c.ns(namespace), Name: name, KeepRuns: keepRuns}))
	return wrap(err)
}

// ListScheduleRuns lists a schedule's runs, newest first.
func (c *Client) ListScheduleRuns(ctx context.Context, namespace, name string) ([]*TrainJob, error) {
	var res *connect.Response[kilnv1.ListCronTrainJobRunsResponse]
	err := retry(ctx, func() (err error) {
		res, err = c.Schedules.ListCronTrainJobRuns(ctx, connect.NewRequest(&kilnv1.ListCronTrainJobRunsRequest{Namespace: c.ns(namespace), Name: name}))
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	var out []*TrainJob
	for _, j := range res.Msg.GetTrainJobs() {
		out = append(out, jobOf(j))
	}
	return out, nil
}
