package jobflags

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// Schedule is what the flags say of a schedule (a CronTrainJob) whose runs are a Job.
type Schedule struct {
	// Cron is --schedule, a cron expression.
	Cron              string
	TimeZone          string
	ConcurrencyPolicy string
	StartingDeadline  string
	// KeepSuccessful and KeepFailed are -1 when not given.
	KeepSuccessful int32
	KeepFailed     int32
	// flags are the schedule's flags given, but for --schedule.
	flags []string
}

// Changed records which flags of a schedule were set.
func (s *Schedule) Changed(cmd *cobra.Command) {
	for _, name := range []string{"time-zone", "concurrency-policy", "starting-deadline", "keep-successful", "keep-failed"} {
		if cmd.Flags().Changed(name) {
			s.flags = append(s.flags, "--"+name)
		}
	}
	if !cmd.Flags().Changed("keep-successful") {
		s.KeepSuccessful = -1
	}
	if !cmd.Flags().Changed("keep-failed") {
		s.KeepFailed = -1
	}
}

// Set reports whether any flag of a schedule was given: the command creates a schedule.
func (s *Schedule) Set() bool { return s.Cron != "" || len(s.flags) > 0 }

// Add adds --schedule and the flags of a schedule to cmd; required says --schedule is what
// the command is about (`kiln schedules create`), not an option (`kiln submit`).
func (s *Schedule) Add(cmd *cobra.Command, required bool) {
	fl := cmd.Flags()
	what := "create a schedule (CronTrainJob) named --name instead of one job: a cron expression, e.g. \"0 2 * * 0\", or @daily"
	if required {
		what = "when to run: a cron expression (minute hour day-of-month month day-of-week), e.g. \"0 2 * * 0\", or @daily"
	}
	fl.StringVar(&s.Cron, "schedule", "", what)
	fl.StringVar(&s.TimeZone, "time-zone", "", "with --schedule: IANA time zone of the schedule, e.g. Europe/Berlin (default UTC)")
	fl.StringVar(&s.ConcurrencyPolicy, "concurrency-policy", "", "with --schedule: Allow, Forbid or Replace (default Allow)")
	fl.StringVar(&s.StartingDeadline, "starting-deadline", "", "with --schedule: skip a run that could not start this long after its time, e.g. 1h")
	fl.Int32Var(&s.KeepSuccessful, "keep-successful", 0, "with --schedule: completed runs to keep (default 3)")
	fl.Int32Var(&s.KeepFailed, "keep-failed", 0, "with --schedule: failed runs to keep (default 1)")
}

var policies = map[string]kilnv1.ConcurrencyPolicy{
	"allow":   kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_ALLOW,
	"forbid":  kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID,
	"replace": kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_REPLACE,
}

// Request builds the CreateCronTrainJob request of the schedule whose runs are the job j
// describes, checking the flags; -n (f.Namespace) is its namespace, when given.
func (s *Schedule) Request(j *Job, f *factory.Factory) (*kilnv1.CreateCronTrainJobRequest, error) {
	switch {
	case s.Cron == "":
		return nil, factory.Usagef("%s: set --schedule too, e.g. --schedule \"0 2 * * 0\"", strings.Join(s.flags, ", "))
	case j.Wait || j.Follow:
		return nil, factory.Usagef("--wait and --follow follow one job: a schedule creates its runs later (follow them with `kiln schedules describe`)")
	case j.GenerateName != "":
		return nil, factory.Usagef("--generate-name: a schedule needs a name (--name): its runs are named after it")
	case j.Name == "" && j.File == "":
		return nil, factory.Usagef("name the schedule with --name: its runs are named NAME-<minute of the scheduled time>")
	}
	spec := &kilnv1.CronTrainJobSpec{Schedule: s.Cron, TimeZone: s.TimeZone}
	if s.ConcurrencyPolicy != "" {
		p, ok := policies[strings.ToLower(s.ConcurrencyPolicy)]
		if !ok {
			return nil, factory.Usagef("--concurrency-policy %q: want Allow, Forbid or Replace", s.ConcurrencyPolicy)
		}
		spec.ConcurrencyPolicy = p
	}
	var err error
	if spec.StartingDeadlineSeconds, err = seconds("--starting-deadline", s.StartingDeadline, 0, int64(math.MaxInt64/time.Second), "to start a late run however late"); err != nil {
		return nil, err
	}
	for _, k := range []struct {
		flag string
		v    int32
		into **int32
	}{{"--keep-successful", s.KeepSuccessful, &spec.SuccessfulJobsHistoryLimit}, {"--keep-failed", s.KeepFailed, &spec.FailedJobsHistoryLimit}} {
		switch {
		case k.v == -1:
		case k.v < 0:
			return nil, factory.Usagef("%s %d: want 0 or more runs", k.flag, k.v)
		default:
			*k.into = &k.v
		}
	}
	job, err := j.Request(f)
	if err != nil {
		return nil, err
	}
	req := &kilnv1.CreateCronTrainJobRequest{Namespace: job.GetNamespace(), DryRun: job.GetDryRun(), RequestId: job.GetRequestId()}
	if m := job.GetManifest(); m != "" {
		manifest, err := cronManifest(m, spec)
		if err != nil {
			return nil, err
		}
		req.Source = &kilnv1.CreateCronTrainJobRequest_Manifest{Manifest: manifest}
		return req, nil
	}
	tj := job.GetTrainJob()
	spec.TrainJob = &kilnv1.TrainJobTemplate{Labels: tj.GetLabels(), Spec: tj.GetSpec()}
	req.Source = &kilnv1.CreateCronTrainJobRequest_CronTrainJob{CronTrainJob: &kilnv1.NewCronTrainJob{Name: j.Name, Labels: tj.GetLabels(), Spec: spec}}
	return req, nil
}

// cronManifest turns a TrainJob manifest into a CronTrainJob whose runs it describes (or
// sets the schedule flags on a CronTrainJob manifest).
func cronManifest(manifest string, cs *kilnv1.CronTrainJobSpec) (string, error) {
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		return "", fmt.Errorf("the manifest: not YAML or JSON: %w", err)
	}
	md := object(obj, "metadata")
	var spec map[string]any
	if obj["kind"] == "CronTrainJob" {
		spec = object(obj, "spec")
	} else {
		tmd := map[string]any{}
		for _, k := range []string{"labels", "annotations"} {
			if v, ok := md[k]; ok {
				tmd[k] = v
			}
		}
		if _, ok := md["generateName"]; ok && md["name"] == nil {
			return "", factory.Usagef("the manifest has metadata.generateName: a schedule needs a name (--name): its runs are named after it")
		}
		tmpl := map[string]any{"spec": obj["spec"]}
		if len(tmd) > 0 {
			tmpl["metadata"] = tmd
		}
		md = map[string]any{"name": md["name"], "namespace": md["namespace"], "labels": md["labels"]}
		for k, v := range md {
			if v == nil {
				delete(md, k)
			}
		}
		spec = map[string]any{"trainJobTemplate": tmpl}
		obj = map[string]any{"apiVersion": "kiln.dev/v1alpha1", "kind": "CronTrainJob", "metadata": md, "spec": spec}
	}
	spec["schedule"] = cs.GetSchedule()
	if cs.GetTimeZone() != "" {
		spec["timeZone"] = cs.GetTimeZone()
	}
	for p, name := range map[kilnv1.ConcurrencyPolicy]string{
		kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_ALLOW: "Allow", kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID: "Forbid",
		kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_REPLACE: "Replace",
	} {
		if cs.GetConcurrencyPolicy() == p {
			spec["concurrencyPolicy"] = name
		}
	}
	if cs.StartingDeadlineSeconds != nil {
		spec["startingDeadlineSeconds"] = *cs.StartingDeadlineSeconds
	}
	if cs.SuccessfulJobsHistoryLimit != nil {
		spec["successfulJobsHistoryLimit"] = *cs.SuccessfulJobsHistoryLimit
	}
	if cs.FailedJobsHistoryLimit != nil {
		spec["failedJobsHistoryLimit"] = *cs.FailedJobsHistoryLimit
	}
	out, err := yaml.Marshal(obj)
	return string(out), err
}
