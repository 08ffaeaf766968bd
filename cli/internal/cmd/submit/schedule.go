package submit

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// NewCmdScheduleCreate returns `kiln schedule create`: `kiln submit --schedule` with the
// schedule's name first; runF replaces its run in tests.
func NewCmdScheduleCreate(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "create NAME --schedule CRON [-f FILE | --runtime RUNTIME [flags]] [-- COMMAND [ARGS...]]",
		Short: "Create a schedule: a TrainJob run on a cron schedule",
		Long: `Create a schedule, a CronTrainJob: at each time its cron expression names, it creates a TrainJob (a
run) from the job the flags or the TrainJob manifest (-f) describe, as a CronJob creates Jobs. -f may
also be a CronTrainJob manifest.

--schedule is a cron expression (minute hour day-of-month month day-of-week) or @yearly, @monthly,
@weekly, @daily, @hourly, read in --time-zone (an IANA name; default UTC). --concurrency-policy says
what happens when a run falls due while the last one is still active (queued in Kueue, suspended or
running): Allow runs both, Forbid skips the new one, Replace deletes the old one. A run that cannot
start within --starting-deadline of its time is skipped; while the operator is down, missed times run
at most once, the latest, when it is back. --keep-successful and --keep-failed bound the finished
runs kept (default 3 and 1). --deadline bounds each run (never counting time queued in Kueue).

Each run is named NAME-<minute of its scheduled time> and is told its scheduled time in
$KILN_SCHEDULED_TIME (RFC 3339), to pick its data window.`,
		Example: `  # Retrain every Sunday at 02:00 Berlin time; never two at once; each run at most 12 hours
  kiln schedule create weekly-retrain --schedule "0 2 * * 0" --time-zone Europe/Berlin \
      --concurrency-policy Forbid --keep-successful 3 --keep-failed 1 \
      --runtime torch-distributed --queue default --deadline 12h -- torchrun train.py

  # Nightly, from a TrainJob manifest
  kiln schedule create nightly --schedule @daily -f trainjob.yaml`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			before := args
			if dash >= 0 {
				before, o.Command = args[:dash], args[dash:]
			}
			if len(before) != 1 {
				return factory.Usagef("name the schedule once, before --: kiln schedule create NAME --schedule CRON ... -- COMMAND")
			}
			o.Name = before[0]
			o.changed(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runSchedule(cmd.Context(), o)
		},
	}
	o.addFlags(cmd)
	o.addScheduleFlags(cmd, true)
	for _, name := range []string{"name", "generate-name", "wait", "follow", "timeout"} {
		_ = cmd.Flags().MarkHidden(name)
	}
	return cmd
}

// addScheduleFlags adds --schedule and the flags of a schedule.
func (o *Options) addScheduleFlags(cmd *cobra.Command, required bool) {
	fl := cmd.Flags()
	what := "create a schedule (CronTrainJob) named --name instead of one job: a cron expression, e.g. \"0 2 * * 0\", or @daily"
	if required {
		what = "when to run: a cron expression (minute hour day-of-month month day-of-week), e.g. \"0 2 * * 0\", or @daily"
	}
	fl.StringVar(&o.Schedule, "schedule", "", what)
	fl.StringVar(&o.TimeZone, "time-zone", "", "with --schedule: IANA time zone of the schedule, e.g. Europe/Berlin (default UTC)")
	fl.StringVar(&o.ConcurrencyPolicy, "concurrency-policy", "", "with --schedule: Allow, Forbid or Replace (default Allow)")
	fl.StringVar(&o.StartingDeadline, "starting-deadline", "", "with --schedule: skip a run that could not start this long after its time, e.g. 1h")
	fl.Int32Var(&o.KeepSuccessful, "keep-successful", 0, "with --schedule: completed runs to keep (default 3)")
	fl.Int32Var(&o.KeepFailed, "keep-failed", 0, "with --schedule: failed runs to keep (default 1)")
}

var policies = map[string]kilnv1.ConcurrencyPolicy{
	"allow":   kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_ALLOW,
	"forbid":  kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID,
	"replace": kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_REPLACE,
}

// scheduleRequest builds the CreateCronTrainJob request, checking the flags.
func (o *Options) scheduleRequest() (*kilnv1.CreateCronTrainJobRequest, error) {
	switch {
	case o.Schedule == "":
		return nil, factory.Usagef("%s: set --schedule too, e.g. --schedule \"0 2 * * 0\"", strings.Join(o.scheduleFlags, ", "))
	case o.Wait || o.Follow:
		return nil, factory.Usagef("--wait and --follow follow one job: a schedule creates its runs later (follow them with `kiln schedule describe`)")
	case o.GenerateName != "":
		return nil, factory.Usagef("--generate-name: a schedule needs a name (--name): its runs are named after it")
	case o.Name == "" && o.File == "":
		return nil, factory.Usagef("name the schedule with --name: its runs are named NAME-<minute of the scheduled time>")
	}
	spec := &kilnv1.CronTrainJobSpec{Schedule: o.Schedule, TimeZone: o.TimeZone}
	if o.ConcurrencyPolicy != "" {
		p, ok := policies[strings.ToLower(o.ConcurrencyPolicy)]
		if !ok {
			return nil, factory.Usagef("--concurrency-policy %q: want Allow, Forbid or Replace", o.ConcurrencyPolicy)
		}
		spec.ConcurrencyPolicy = p
	}
	var err error
	if spec.StartingDeadlineSeconds, err = seconds("--starting-deadline", o.StartingDeadline, 0, int64(math.MaxInt64/time.Second), "to start a late run however late"); err != nil {
		return nil, err
	}
	for _, k := range []struct {
		flag string
		v    int32
		into **int32
	}{{"--keep-successful", o.KeepSuccessful, &spec.SuccessfulJobsHistoryLimit}, {"--keep-failed", o.KeepFailed, &spec.FailedJobsHistoryLimit}} {
		switch {
		case k.v == -1:
		case k.v < 0:
			return nil, factory.Usagef("%s %d: want 0 or more runs", k.flag, k.v)
		default:
			*k.into = &k.v
		}
	}
	job, err := o.request()
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
	req.Source = &kilnv1.CreateCronTrainJobRequest_CronTrainJob{CronTrainJob: &kilnv1.NewCronTrainJob{Name: o.Name, Labels: tj.GetLabels(), Spec: spec}}
	return req, nil
}

// cronManifest turns a TrainJob manifest into a CronTrainJob whose runs it describes (or
// sets the schedule flags on a CronTrainJob manifest).
func cronManifest(manifest string, s *kilnv1.CronTrainJobSpec) (string, error) {
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
	spec["schedule"] = s.GetSchedule()
	if s.GetTimeZone() != "" {
		spec["timeZone"] = s.GetTimeZone()
	}
	for p, name := range map[kilnv1.ConcurrencyPolicy]string{
		kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_ALLOW: "Allow", kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID: "Forbid",
		kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_REPLACE: "Replace",
	} {
		if s.GetConcurrencyPolicy() == p {
			spec["concurrencyPolicy"] = name
		}
	}
	if s.StartingDeadlineSeconds != nil {
		spec["startingDeadlineSeconds"] = *s.StartingDeadlineSeconds
	}
	if s.SuccessfulJobsHistoryLimit != nil {
		spec["successfulJobsHistoryLimit"] = *s.SuccessfulJobsHistoryLimit
	}
	if s.FailedJobsHistoryLimit != nil {
		spec["failedJobsHistoryLimit"] = *s.FailedJobsHistoryLimit
	}
	out, err := yaml.Marshal(obj)
	return string(out), err
}

// runSchedule creates the schedule and says when it runs next.
func runSchedule(ctx context.Context, o *Options) error {
	req, err := o.scheduleRequest()
	if err != nil {
		return err
	}
	if o.Output != "" && o.Output != "json" && o.Output != "yaml" && o.Output != "name" {
		return factory.Usagef("--output %q: want json, yaml or name", o.Output)
	}
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	if req.Namespace == "" && (req.GetManifest() == "" || manifestNamespace(req.GetManifest()) == "") {
		req.Namespace = c.Namespace
	}
	res, err := c.Schedules.CreateCronTrainJob(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	io, cj := o.Factory.IO, res.Msg.GetCronTrainJob()
	switch {
	case o.DryRun:
		_, err = fmt.Fprint(io.Out, res.Msg.GetManifest())
	case o.Output == "json":
		err = printer.JSON(io.Out, cj)
	case o.Output == "yaml":
		err = printer.YAML(io.Out, cj)
	case o.Output == "name":
		_, err = fmt.Fprintln(io.Out, cj.GetName())
	default:
		verb := "created"
		if res.Msg.GetReplayed() {
			verb = "already created by this request"
		}
		_, err = fmt.Fprintf(io.Out, "crontrainjob %s/%s %s\n", cj.GetNamespace(), cj.GetName(), verb)
		if err == nil && io.IsTTY() {
			fmt.Fprintln(io.ErrOut, io.Gray(printer.NextRun(cj, o.Factory.Clock.Now())+"   Its runs: kiln schedule describe "+cj.GetName()))
		}
	}
	return err
}
