// Package describe is `kiln schedules describe`: when a schedule runs, what, and its runs.
package describe

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln schedules describe` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
}

// NewCmdDescribe returns the command; runF replaces its run in tests.
func NewCmdDescribe(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "Describe a schedule: when it runs, what, and its runs",
		Args:  cobra.ExactArgs(1),
		RunE:  factory.RunNameE(o, &o.Name, runF, run),
	}
}

func run(ctx context.Context, o *Options) error {
	c, err := o.Factory.Client()
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
	d := printer.NewDescription(20)
	sp, st := cj.GetSpec(), cj.GetStatus()
	run := sp.GetTrainJob().GetSpec()
	d.Field("Name", cj.GetName())
	d.Field("Namespace", cj.GetNamespace())
	d.Field("Created", printer.Age(now, cj.GetCreateTime().AsTime())+" ago")
	d.Field("Schedule", sp.GetSchedule()+" ("+cmp.Or(sp.GetTimeZone(), "UTC")+")")
	d.Field("Concurrency policy", printer.PolicyName(sp.GetConcurrencyPolicy()))
	if sp.StartingDeadlineSeconds != nil {
		d.Field("Starting deadline", printer.Duration(time.Duration(sp.GetStartingDeadlineSeconds())*time.Second)+" after the scheduled time")
	}
	d.Field("Suspended", fmt.Sprint(sp.GetSuspend()))
	keep := func(p *int32, def int32) string {
		if p != nil {
			return fmt.Sprint(*p)
		}
		return fmt.Sprint(def)
	}
	d.Field("History", fmt.Sprintf("keeps %s completed, %s failed runs", keep(sp.SuccessfulJobsHistoryLimit, 3), keep(sp.FailedJobsHistoryLimit, 1)))
	d.Labels(cj.GetLabels())
	d.WriteString("\nEach run:\n")
	d.Field("  Runtime", run.GetRuntime())
	d.Field("  Image", cmp.Or(run.GetImage(), "the runtime's"))
	d.Field("  Command", strings.Join(append(slices.Clone(run.GetCommand()), run.GetArgs()...), " "))
	if run.GetNodes() > 0 {
		d.Field("  Nodes", fmt.Sprint(run.GetNodes()))
	}
	d.Field("  Queue", run.GetQueue())
	if run.ActiveDeadlineSeconds != nil {
		d.Field("  Deadline", printer.Duration(time.Duration(run.GetActiveDeadlineSeconds())*time.Second)+" of running")
	}
	d.WriteString("\n")
	d.Field("Next run", strings.TrimSuffix(strings.TrimPrefix(printer.NextRun(cj, now), "Next run: "), "."))
	if st.GetLastScheduleTime() != nil {
		d.Field("Last scheduled", st.GetLastScheduleTime().AsTime().UTC().Format(time.RFC3339)+" ("+printer.Age(now, st.GetLastScheduleTime().AsTime())+" ago)")
	}
	if st.GetLastSuccessfulTime() != nil {
		d.Field("Last success", printer.Age(now, st.GetLastSuccessfulTime().AsTime())+" ago")
	}
	d.Field("Active", strings.Join(st.GetActive(), ", "))
	for _, c := range st.GetConditions() {
		if c.GetStatus() != "True" {
			d.Field("Not "+strings.ToLower(c.GetType()), c.GetReason()+": "+c.GetMessage())
		}
	}
	t := printer.NewTable(io, "NAME", "SCHEDULED FOR", "STATE", "AGE").Aligned()
	for _, j := range rs {
		at := cmp.Or(j.GetAnnotations()[printer.AnnotationScheduledTime], "-")
		if j.GetAnnotations()[printer.AnnotationTriggeredBy] != "" {
			at += " (triggered)"
		}
		st := j.GetStatus()
		t.ColoredRow([]string{j.GetName(), at, printer.StateName(st.GetState()), printer.Age(now, j.GetCreateTime().AsTime())},
			[]func(string) string{nil, nil, printer.StateColor(io, st.GetState()), nil})
	}
	d.Section("Runs", t, runsErr, "none yet")
	return d.String()
}
