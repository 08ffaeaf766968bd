// Package describe is `kiln schedule describe`: when a schedule runs, what, and its runs.
package describe

import (
	"cmp"
	"context"
	"fmt"
	"maps"
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

// Options are what `kiln schedule describe` was asked.
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
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return run(cmd.Context(), o)
		},
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
	field("Schedule", sp.GetSchedule()+" ("+cmp.Or(sp.GetTimeZone(), "UTC")+")")
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
	field("  Image", cmp.Or(run.GetImage(), "the runtime's"))
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
			at := cmp.Or(j.GetAnnotations()[printer.AnnotationScheduledTime], "-")
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
