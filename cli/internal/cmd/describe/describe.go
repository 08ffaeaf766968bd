// Package describe is `kiln describe`: everything about a job a person wants to know, in
// words: what it runs, what state it is in and why, when its timers fire, its timeline,
// its steps and its events.
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

// Options are what `kiln describe` was asked.
type Options struct {
	Factory *factory.Factory
	Name    string
}

// NewCmdDescribe returns the command; runF replaces its run in tests.
func NewCmdDescribe(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	return &cobra.Command{
		Use:     "describe NAME",
		Short:   "Describe a training job: state and why, timers, queue position, steps, events",
		Example: `  kiln describe mnist`,
		Args:    cobra.ExactArgs(1),
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
	res, err := c.Jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: c.Namespace, Name: o.Name}))
	if err != nil {
		return err
	}
	evs, err := c.Jobs.ListEvents(ctx, connect.NewRequest(&kilnv1.ListEventsRequest{Namespace: c.Namespace, Name: o.Name}))
	var events []*kilnv1.Event
	if err == nil {
		events = evs.Msg.GetEvents()
	}
	_, werr := fmt.Fprint(o.Factory.IO.Out, Describe(o.Factory.IO, o.Factory.Clock.Now(), res.Msg.GetTrainJob(), events, err))
	return werr
}

// Describe renders a job; eventsErr says why events are missing (nil when they are not).
func Describe(io *iostreams.IOStreams, now time.Time, j *kilnv1.TrainJob, events []*kilnv1.Event, eventsErr error) string {
	var b strings.Builder
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%-16s%s\n", name+":", value)
		}
	}
	sp, st := j.GetSpec(), j.GetStatus()
	field("Name", j.GetName())
	field("Namespace", j.GetNamespace())
	field("Created", printer.Age(now, j.GetCreateTime().AsTime())+" ago")
	kind := "ClusterTrainingRuntime"
	if sp.GetRuntimeKind() == kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED {
		kind = "TrainingRuntime"
	}
	field("Runtime", fmt.Sprintf("%s (%s)", sp.GetRuntime(), kind))
	field("Image", cmp.Or(sp.GetImage(), "the runtime's"))
	field("Command", strings.Join(append(slices.Clone(sp.GetCommand()), sp.GetArgs()...), " "))
	nodes := "the runtime's"
	if sp.GetNodes() > 0 {
		nodes = fmt.Sprint(sp.GetNodes())
	}
	if r := resources(sp.GetResourcesPerNode()); r != "" {
		nodes += ", each " + r
	}
	field("Nodes", nodes)
	if sp.GetProcsPerNode() > 0 {
		field("Procs per node", fmt.Sprint(sp.GetProcsPerNode()))
	}
	field("Dataset", sp.GetDatasetUri())
	field("Model", sp.GetModelUri())
	for _, e := range sp.GetEnv() {
		field("Env", e.GetName()+"="+e.GetValue())
	}
	if len(j.GetLabels()) > 0 {
		keys := slices.Sorted(maps.Keys(j.GetLabels()))
		var ls []string
		for _, k := range keys {
			ls = append(ls, k+"="+j.GetLabels()[k])
		}
		field("Labels", strings.Join(ls, ", "))
	}
	if cron := j.GetLabels()[printer.LabelSchedule]; cron != "" {
		run := "a run of schedule " + cron
		if at := j.GetAnnotations()[printer.AnnotationScheduledTime]; at != "" {
			run += ", scheduled for " + at
		}
		if by := j.GetAnnotations()[printer.AnnotationTriggeredBy]; by != "" {
			run += ", triggered by " + by
		}
		field("Schedule", run)
	}
	b.WriteString("\n")

	state := printer.StateColor(io, st.GetState())(printer.StateName(st.GetState()))
	if st.GetReason() != "" {
		state += " (" + st.GetReason() + ")"
	}
	field("State", state)
	field("Message", st.GetMessage())
	if q := st.GetQueue(); q != nil || sp.GetQueue() != "" {
		queue := cmp.Or(q.GetLocalQueue(), sp.GetQueue())
		if q.GetClusterQueue() != "" {
			queue += " (ClusterQueue " + q.GetClusterQueue() + ")"
		}
		if q.GetPositionInLocalQueue() > 0 {
			queue += fmt.Sprintf(", #%d in this queue, #%d in its ClusterQueue", q.GetPositionInLocalQueue(), q.GetPositionInClusterQueue())
		}
		if q.GetAdmitted() {
			queue += ", admitted"
		}
		field("Queue", queue)
	}
	if sp.GetPriorityClass() != "" {
		field("Priority class", sp.GetPriorityClass())
	}
	if st.GetStartTime() != nil {
		field("Started", printer.Age(now, st.GetStartTime().AsTime())+" ago")
	}
	if st.GetCompletionTime() != nil {
		field("Finished", printer.Age(now, st.GetCompletionTime().AsTime())+" ago")
	}
	finished := st.GetState() == kilnv1.State_STATE_COMPLETE || st.GetState() == kilnv1.State_STATE_FAILED
	switch {
	case finished && st.ActiveDeadlineSeconds != nil:
		field("Deadline", printer.Duration(time.Duration(st.GetActiveDeadlineSeconds())*time.Second)+" of running")
	case st.GetDeadlineTime() != nil:
		field("Deadline", fmt.Sprintf("%s (after %s of running)", printer.Until(now, st.GetDeadlineTime().AsTime()), printer.Duration(time.Duration(st.GetActiveDeadlineSeconds())*time.Second)))
	case st.ActiveDeadlineSeconds != nil:
		field("Deadline", fmt.Sprintf("after %s of running (counts while it runs)", printer.Duration(time.Duration(st.GetActiveDeadlineSeconds())*time.Second)))
	}
	switch {
	case st.GetTtlDeleteTime() != nil:
		field("TTL", fmt.Sprintf("deleted %s by TTL", printer.Until(now, st.GetTtlDeleteTime().AsTime())))
	case st.TtlSecondsAfterFinished != nil:
		field("TTL", fmt.Sprintf("deleted %s after it finishes", printer.Duration(time.Duration(st.GetTtlSecondsAfterFinished())*time.Second)))
	}
	if r := st.GetRestarts(); r != nil {
		restarts := fmt.Sprintf("%d (%d of maxRestarts %d counted; disruptions do not count)", r.GetCount(), r.GetCountedTowardsMax(), r.GetMaxRestarts())
		if r.GetLastReason() != "" {
			restarts += ", last: " + r.GetLastReason()
			if r.GetLastRestartTime() != nil {
				restarts += " " + printer.Age(now, r.GetLastRestartTime().AsTime()) + " ago"
			}
		}
		field("Restarts", restarts)
	}

	if tl := timeline(j, events); len(tl) > 1 {
		b.WriteString("\nTimeline:\n")
		t := printer.NewTable(io, "AGE", "WHAT", "AFTER", "DETAIL").Aligned()
		for i, m := range tl {
			after := "-"
			if i > 0 {
				after = "+" + printer.Duration(m.at.Sub(tl[i-1].at))
			}
			t.Row(printer.Age(now, m.at)+" ago", m.what, after, cmp.Or(m.detail, "-"))
		}
		_ = t.Render(indent{&b})
	}
	if len(st.GetSteps()) > 0 {
		b.WriteString("\nSteps:\n")
		t := printer.NewTable(io, "STEP", "PHASE", "NODE", "DEVICES", "RESTARTS", "STARTED", "REASON").Aligned()
		for _, s := range st.GetSteps() {
			started := "-"
			if s.GetStartTime() != nil {
				started = printer.Age(now, s.GetStartTime().AsTime()) + " ago"
			}
			reason := s.GetReason()
			if s.ExitCode != nil && s.GetExitCode() != 0 {
				reason = strings.TrimSpace(fmt.Sprintf("%s exit %d", reason, s.GetExitCode()))
			}
			t.Row(s.GetName(), s.GetPhase(), cmp.Or(s.GetNode(), "-"), devices(s.GetDevices()), fmt.Sprint(s.GetRestarts()), started, cmp.Or(reason, "-"))
		}
		_ = t.Render(indent{&b})
	}
	b.WriteString("\nEvents:\n")
	switch {
	case eventsErr != nil:
		fmt.Fprintf(&b, "  (not shown: %s)\n", factory.Message(eventsErr, ""))
	case len(events) == 0:
		b.WriteString("  none\n")
	default:
		t := printer.NewTable(io, "AGE", "TYPE", "REASON", "OBJECT", "MESSAGE").Aligned()
		for _, e := range events {
			age := printer.Age(now, e.GetLastTime().AsTime())
			if e.GetCount() > 1 {
				age += fmt.Sprintf(" (x%d)", e.GetCount())
			}
			t.Row(age, e.GetType(), e.GetReason(), e.GetObject(), e.GetMessage())
		}
		_ = t.Render(indent{&b})
	}
	return b.String()
}

// indent writes each line two spaces in.
type indent struct{ b *strings.Builder }

func (w indent) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			w.b.WriteString("  " + line)
		}
	}
	return len(p), nil
}

func resources(r *kilnv1.Resources) string {
	if r == nil {
		return ""
	}
	all := map[string]string{}
	maps.Copy(all, r.GetRequests())
	maps.Copy(all, r.GetLimits())
	var out []string
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, k+"="+all[k])
	}
	return strings.Join(out, " ")
}

func devices(ds []*kilnv1.Device) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s=%d", d.GetResource(), d.GetCount()))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, " ")
}
