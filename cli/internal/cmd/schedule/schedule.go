// Package schedule is `kiln schedule`: schedules (CronTrainJobs) that create a TrainJob at
// each time of a cron expression. `kiln schedule create` is `kiln submit --schedule`.
package schedule

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/cmd/submit"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what a `kiln schedule` subcommand was asked.
type Options struct {
	Factory       *factory.Factory
	Name          string
	AllNamespaces bool
	Selector      string
	Output        string
	KeepRuns      bool
	RequestID     string
	// Verb is the subcommand: list, get, describe, runs, suspend, resume, trigger or delete.
	Verb string
}

// NewCmdSchedule returns `kiln schedule` and its subcommands; runF replaces the run of
// every subcommand but create in tests.
func NewCmdSchedule(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schedule <command>",
		Aliases: []string{"schedules"},
		Short:   "Run training jobs on a schedule (CronTrainJobs)",
		Long: `A schedule (a kiln.dev/v1alpha1 CronTrainJob) creates a training job, a run, at each time of a cron
expression, with CronJob's fields and meaning: a time zone, a concurrency policy (Allow, Forbid,
Replace), a starting deadline and history limits. Each run is a TrainJob named
NAME-<minute of its scheduled time>, told its scheduled time in $KILN_SCHEDULED_TIME.`,
		Example: `  kiln schedule create weekly-retrain --schedule "0 2 * * 0" --time-zone Europe/Berlin \
      --concurrency-policy Forbid --runtime torch-distributed --deadline 12h -- torchrun train.py
  kiln schedule list
  kiln schedule describe weekly-retrain
  kiln schedule trigger weekly-retrain`,
	}
	cmd.AddCommand(submit.NewCmdScheduleCreate(f, nil))
	sub := func(use, short, long string, args cobra.PositionalArgs, flags func(*cobra.Command, *Options)) {
		name := strings.Fields(use)[0]
		o := &Options{Factory: f, Verb: name}
		c := &cobra.Command{
			Use: use, Short: short, Long: long, Args: args,
			RunE: func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					o.Name = args[0]
				}
				if runF != nil {
					return runF(cmd.Context(), o)
				}
				return runs[name](cmd.Context(), o)
			},
		}
		if flags != nil {
			flags(c, o)
		}
		cmd.AddCommand(c)
	}
	sub("list", "List schedules", `List the schedules of the namespace (or all namespaces with -A): NAME, SCHEDULE, TIMEZONE,
SUSPEND, ACTIVE (runs not finished), LAST SCHEDULE, NEXT, AGE.`, cobra.NoArgs, func(c *cobra.Command, o *Options) {
		c.Aliases = []string{"ls"}
		c.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "list the schedules of every namespace you may list")
		c.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector, e.g. team=nlp")
		c.Flags().StringVarP(&o.Output, "output", "o", "", "wide, json or yaml")
	})
	sub("get NAME", "Show one schedule", "Show one schedule as a table row, or all of it with -o json or -o yaml.", cobra.ExactArgs(1), func(c *cobra.Command, o *Options) {
		c.Flags().StringVarP(&o.Output, "output", "o", "", "wide, json or yaml")
	})
	sub("describe NAME", "Describe a schedule: when it runs, what, and its runs", "", cobra.ExactArgs(1), nil)
	sub("runs NAME", "List a schedule's runs, newest first", "", cobra.ExactArgs(1), func(c *cobra.Command, o *Options) {
		c.Flags().StringVarP(&o.Output, "output", "o", "", "wide, json or yaml")
	})
	sub("suspend NAME", "Suspend a schedule: no new runs", "Suspend a schedule: it creates no runs until it is resumed; runs already created go on.", cobra.ExactArgs(1), nil)
	sub("resume NAME", "Resume a schedule", `Resume a suspended schedule. A time missed while it was suspended runs once, now, if it is
within the schedule's starting deadline (as for a CronJob).`, cobra.ExactArgs(1), nil)
	sub("trigger NAME", "Create a run now, outside the schedule", `Create a run of a schedule now (as kubectl create job --from=cronjob/NAME). It is one of the
schedule's runs: it counts as active for Forbid and Replace, and the history limits keep or delete it.`, cobra.ExactArgs(1), func(c *cobra.Command, o *Options) {
		c.Flags().StringVar(&o.RequestID, "request-id", "", "id that makes retries of this trigger safe (default: random)")
		c.Flags().StringVarP(&o.Output, "output", "o", "", "name: print only the run's name")
	})
	sub("delete NAME", "Delete a schedule and its runs", "Delete a schedule and, unless --keep-runs, its runs.", cobra.ExactArgs(1), func(c *cobra.Command, o *Options) {
		c.Flags().BoolVar(&o.KeepRuns, "keep-runs", false, "keep the runs (they lose their owner)")
	})
	return cmd
}

var runs = map[string]func(context.Context, *Options) error{
	"list": list, "get": get, "describe": describe, "runs": listRuns,
	"suspend": suspend, "resume": suspend, "trigger": trigger, "delete": remove,
}

func checkOutput(o *Options, allowed ...string) error {
	if o.Output != "" && !slices.Contains(allowed, o.Output) {
		return factory.Usagef("--output %q: want %s", o.Output, strings.Join(allowed, ", "))
	}
	return nil
}

func list(ctx context.Context, o *Options) error {
	if err := checkOutput(o, "wide", "json", "yaml"); err != nil {
		return err
	}
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	req := &kilnv1.ListCronTrainJobsRequest{LabelSelector: o.Selector, AllNamespaces: o.AllNamespaces}
	if !o.AllNamespaces {
		req.Namespace = c.Namespace
	}
	res, err := c.Schedules.ListCronTrainJobs(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	io := o.Factory.IO
	switch o.Output {
	case "json":
		return printer.JSON(io.Out, res.Msg)
	case "yaml":
		return printer.YAML(io.Out, res.Msg)
	}
	if len(res.Msg.GetCronTrainJobs()) == 0 {
		if io.IsTTY() {
			fmt.Fprintf(io.ErrOut, "No schedules in %s. Create one: kiln schedule create NAME --schedule CRON --runtime RUNTIME -- COMMAND\n",
				map[bool]string{true: "any namespace you may list", false: "namespace " + c.Namespace}[o.AllNamespaces])
		}
		return nil
	}
	return printer.ScheduleTable(io, o.Factory.Clock.Now(), res.Msg.GetCronTrainJobs(), o.AllNamespaces, o.Output == "wide").Render(io.Out)
}

func get(ctx context.Context, o *Options) error {
	if err := checkOutput(o, "wide", "json", "yaml"); err != nil {
		return err
	}
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	res, err := c.Schedules.GetCronTrainJob(ctx, connect.NewRequest(&kilnv1.GetCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
	if err != nil {
		return err
	}
	io, cj := o.Factory.IO, res.Msg.GetCronTrainJob()
	switch o.Output {
	case "json":
		return printer.JSON(io.Out, cj)
	case "yaml":
		return printer.YAML(io.Out, cj)
	}
	return printer.ScheduleTable(io, o.Factory.Clock.Now(), []*kilnv1.CronTrainJob{cj}, false, o.Output == "wide").Render(io.Out)
}

func listRuns(ctx context.Context, o *Options) error {
	if err := checkOutput(o, "wide", "json", "yaml"); err != nil {
		return err
	}
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	res, err := c.Schedules.ListCronTrainJobRuns(ctx, connect.NewRequest(&kilnv1.ListCronTrainJobRunsRequest{Namespace: c.Namespace, Name: o.Name}))
	if err != nil {
		return err
	}
	io := o.Factory.IO
	switch o.Output {
	case "json":
		return printer.JSON(io.Out, res.Msg)
	case "yaml":
		return printer.YAML(io.Out, res.Msg)
	}
	if len(res.Msg.GetTrainJobs()) == 0 {
		if io.IsTTY() {
			fmt.Fprintf(io.ErrOut, "Schedule %s has no runs.\n", o.Name)
		}
		return nil
	}
	return printer.JobTable(io, o.Factory.Clock.Now(), res.Msg.GetTrainJobs(), false, o.Output == "wide").Render(io.Out)
}

func describe(ctx context.Context, o *Options) error {
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	res, err := c.Schedules.GetCronTrainJob(ctx, connect.NewRequest(&kilnv1.GetCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
	if err != nil {
		return err
	}
	rr, rerr := c.Schedules.ListCronTrainJobRuns(ctx, connect.NewRequest(&kilnv1.ListCronTrainJobRunsRequest{Namespace: c.Namespace, Name: o.Name}))
	var rs []*kilnv1.TrainJob
	if rerr == nil {
		rs = rr.Msg.GetTrainJobs()
	}
	_, err = fmt.Fprint(o.Factory.IO.Out, Describe(o.Factory.IO, o.Factory.Clock.Now(), res.Msg.GetCronTrainJob(), rs, rerr))
	return err
}

// Describe renders a schedule and its runs; runsErr says why the runs are missing.
func Describe(io *iostreams.IOStreams, now time.Time, cj *kilnv1.CronTrainJob, rs []*kilnv1.TrainJob, runsErr error) string {
	var b strings.Builder
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%-20s%s\n", name+":", value)
		}
	}
	sp, st := cj.GetSpec(), cj.GetStatus()
	run := sp.GetTrainJob().GetSpec()
	field("Name", cj.GetName())
	field("Namespace", cj.GetNamespace())
	field("Created", printer.Age(now, cj.GetCreateTime().AsTime())+" ago")
	field("Schedule", sp.GetSchedule()+" ("+orDefault(sp.GetTimeZone(), "UTC")+")")
	field("Concurrency policy", printer.PolicyName(sp.GetConcurrencyPolicy()))
	if sp.StartingDeadlineSeconds != nil {
		field("Starting deadline", printer.Duration(time.Duration(sp.GetStartingDeadlineSeconds())*time.Second)+" after the scheduled time")
	}
	field("Suspended", fmt.Sprint(sp.GetSuspend()))
	keep := func(p *int32, def int32) string {
		if p != nil {
			return fmt.Sprint(*p)
		}
		return fmt.Sprint(def)
	}
	field("History", fmt.Sprintf("keeps %s completed, %s failed runs", keep(sp.SuccessfulJobsHistoryLimit, 3), keep(sp.FailedJobsHistoryLimit, 1)))
	if len(cj.GetLabels()) > 0 {
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(cj.GetLabels())) {
			ls = append(ls, k+"="+cj.GetLabels()[k])
		}
		field("Labels", strings.Join(ls, ", "))
	}
	b.WriteString("\nEach run:\n")
	field("  Runtime", run.GetRuntime())
	field("  Image", orDefault(run.GetImage(), "the runtime's"))
	field("  Command", strings.Join(append(slices.Clone(run.GetCommand()), run.GetArgs()...), " "))
	if run.GetNodes() > 0 {
		field("  Nodes", fmt.Sprint(run.GetNodes()))
	}
	field("  Queue", run.GetQueue())
	if run.ActiveDeadlineSeconds != nil {
		field("  Deadline", printer.Duration(time.Duration(run.GetActiveDeadlineSeconds())*time.Second)+" of running")
	}
	b.WriteString("\n")
	field("Next run", strings.TrimSuffix(strings.TrimPrefix(printer.NextRun(cj, now), "Next run: "), "."))
	if st.GetLastScheduleTime() != nil {
		field("Last scheduled", st.GetLastScheduleTime().AsTime().UTC().Format(time.RFC3339)+" ("+printer.Age(now, st.GetLastScheduleTime().AsTime())+" ago)")
	}
	if st.GetLastSuccessfulTime() != nil {
		field("Last success", printer.Age(now, st.GetLastSuccessfulTime().AsTime())+" ago")
	}
	field("Active", strings.Join(st.GetActive(), ", "))
	for _, c := range st.GetConditions() {
		if c.GetStatus() != "True" {
			field("Not "+strings.ToLower(c.GetType()), c.GetReason()+": "+c.GetMessage())
		}
	}
	b.WriteString("\nRuns:\n")
	switch {
	case runsErr != nil:
		fmt.Fprintf(&b, "  (not shown: %s)\n", factory.Message(runsErr, ""))
	case len(rs) == 0:
		b.WriteString("  none yet\n")
	default:
		t := printer.NewTable(io, "NAME", "SCHEDULED FOR", "STATE", "AGE").Aligned()
		for _, j := range rs {
			at := orDefault(j.GetAnnotations()[printer.AnnotationScheduledTime], "-")
			if j.GetAnnotations()[printer.AnnotationTriggeredBy] != "" {
				at += " (triggered)"
			}
			st := j.GetStatus()
			t.ColoredRow([]string{j.GetName(), at, printer.StateName(st.GetState()), printer.Age(now, j.GetCreateTime().AsTime())},
				[]func(string) string{nil, nil, printer.StateColor(io, st.GetState()), nil})
		}
		for _, line := range strings.SplitAfter(renderString(t), "\n") {
			if line != "" {
				b.WriteString("  " + line)
			}
		}
	}
	return b.String()
}

func renderString(t *printer.Table) string {
	var b strings.Builder
	_ = t.Render(&b)
	return b.String()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// suspend is `kiln schedule suspend` and `kiln schedule resume`.
func suspend(ctx context.Context, o *Options) error {
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	var cj *kilnv1.CronTrainJob
	verb := "suspended"
	if o.Verb == "resume" {
		res, err := c.Schedules.ResumeCronTrainJob(ctx, connect.NewRequest(&kilnv1.ResumeCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
		if err != nil {
			return err
		}
		cj, verb = res.Msg.GetCronTrainJob(), "resumed"
	} else {
		res, err := c.Schedules.SuspendCronTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
		if err != nil {
			return err
		}
		cj = res.Msg.GetCronTrainJob()
	}
	io := o.Factory.IO
	fmt.Fprintf(io.Out, "crontrainjob %s/%s %s\n", cj.GetNamespace(), cj.GetName(), verb)
	if io.IsTTY() {
		fmt.Fprintln(io.ErrOut, io.Gray(printer.NextRun(cj, o.Factory.Clock.Now())))
	}
	return nil
}

func trigger(ctx context.Context, o *Options) error {
	if err := checkOutput(o, "name"); err != nil {
		return err
	}
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	id := o.RequestID
	if id == "" {
		id = submit.RequestID()
	}
	res, err := c.Schedules.TriggerCronTrainJob(ctx, connect.NewRequest(&kilnv1.TriggerCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name, RequestId: id}))
	if err != nil {
		return err
	}
	io, j := o.Factory.IO, res.Msg.GetTrainJob()
	if o.Output == "name" {
		_, err = fmt.Fprintln(io.Out, j.GetName())
		return err
	}
	verb := "created"
	if res.Msg.GetReplayed() {
		verb = "already created by this request"
	}
	fmt.Fprintf(io.Out, "trainjob %s/%s %s (a run of schedule %s)\n", j.GetNamespace(), j.GetName(), verb, o.Name)
	if io.IsTTY() {
		fmt.Fprintln(io.ErrOut, io.Gray(fmt.Sprintf("Follow it: kiln logs -f %s   Its state: kiln describe %s", j.GetName(), j.GetName())))
	}
	return nil
}

func remove(ctx context.Context, o *Options) error {
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	if _, err := c.Schedules.DeleteCronTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteCronTrainJobRequest{Namespace: c.Namespace, Name: o.Name, KeepRuns: o.KeepRuns})); err != nil {
		return err
	}
	what := "and its runs "
	if o.KeepRuns {
		what = "(its runs kept) "
	}
	_, err = fmt.Fprintf(o.Factory.IO.Out, "crontrainjob %s/%s %sdeleted\n", c.Namespace, o.Name, what)
	return err
}
