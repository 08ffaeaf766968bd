// Package describe is `kiln describe`: everything about a job a person wants to know, in
// words: what it runs, what state it is in and why, when its timers fire, how far its
// training is, its timeline, its steps and its events.
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
		Use:   "describe NAME",
		Short: "Describe a training job: state and why, timers, queue position, progress, steps, events",
		Long: `Describe a training job: what it runs, its state and why, its timers and queue position, where
Kueue placed it on a topology (block, rack, each node), its timeline, steps and events. Once its
trainer reports, a Progress section shows the percent, step,
ETA, when it last reported and what its progress deadline does if it stays silent, its latest
metrics and checkpoint, and the curve of its loss (or of its first metric) from the metric history.`,
		Example: `  kiln describe mnist`,
		Args:    cobra.ExactArgs(1),
		RunE:    factory.RunNameE(o, &o.Name, runF, run),
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
	j, more := res.Msg.GetTrainJob(), Related{}
	evs, err := c.Jobs.ListEvents(ctx, connect.NewRequest(&kilnv1.ListEventsRequest{Namespace: c.Namespace, Name: o.Name}))
	if more.EventsErr = err; err == nil {
		more.Events = evs.Msg.GetEvents()
	}
	// Only a job whose trainer reports has a curve to draw: the others cost no call (nor an
	// error from a server older than the call).
	if j.GetStatus().GetProgress() != nil {
		m, err := c.Jobs.GetTrainJobMetrics(ctx, connect.NewRequest(&kilnv1.GetTrainJobMetricsRequest{Namespace: c.Namespace, Name: o.Name}))
		if more.MetricsErr = err; err == nil {
			more.Metrics = m.Msg
		}
	}
	_, werr := fmt.Fprint(o.Factory.IO.Out, Describe(o.Factory.IO, o.Factory.Clock.Now(), j, more))
	return werr
}

// Related is what describe shows besides the job itself, each part with the error that
// keeps it from showing (nil when it shows): the rest of the description shows anyway.
type Related struct {
	Events    []*kilnv1.Event
	EventsErr error
	// Metrics is the job's metric history, asked for once its trainer reports.
	Metrics    *kilnv1.GetTrainJobMetricsResponse
	MetricsErr error
}

// nameWidth is the width of the description's name column.
const nameWidth = 16

// Describe renders a job with what was fetched of it besides.
func Describe(io *iostreams.IOStreams, now time.Time, j *kilnv1.TrainJob, more Related) string {
	d := printer.NewDescription(nameWidth)
	sp, st := j.GetSpec(), j.GetStatus()
	d.Field("Name", j.GetName())
	d.Field("Namespace", j.GetNamespace())
	d.Field("Created", printer.Age(now, j.GetCreateTime().AsTime())+" ago")
	kind := "ClusterTrainingRuntime"
	if sp.GetRuntimeKind() == kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED {
		kind = "TrainingRuntime"
	}
	d.Field("Runtime", fmt.Sprintf("%s (%s)", sp.GetRuntime(), kind))
	d.Field("Image", cmp.Or(sp.GetImage(), "the runtime's"))
	d.Field("Command", strings.Join(append(slices.Clone(sp.GetCommand()), sp.GetArgs()...), " "))
	nodes := "the runtime's"
	if sp.GetNodes() > 0 {
		nodes = fmt.Sprint(sp.GetNodes())
	}
	if r := resources(sp.GetResourcesPerNode()); r != "" {
		nodes += ", each " + r
	}
	d.Field("Nodes", nodes)
	if sp.GetProcsPerNode() > 0 {
		d.Field("Procs per node", fmt.Sprint(sp.GetProcsPerNode()))
	}
	d.Field("Dataset", sp.GetDatasetUri())
	d.Field("Model", sp.GetModelUri())
	for _, e := range sp.GetEnv() {
		d.Field("Env", e.GetName()+"="+e.GetValue())
	}
	d.Labels(j.GetLabels())
	if cron := j.GetLabels()[printer.LabelSchedule]; cron != "" {
		run := "a run of schedule " + cron
		if at := j.GetAnnotations()[printer.AnnotationScheduledTime]; at != "" {
			run += ", scheduled for " + at
		}
		if by := j.GetAnnotations()[printer.AnnotationTriggeredBy]; by != "" {
			run += ", triggered by " + by
		}
		d.Field("Schedule", run)
	}
	d.WriteString("\n")

	reason := ""
	if st.GetReason() != "" {
		reason = " (" + st.GetReason() + ")"
	}
	d.ColoredField("State", printer.JobState(st), printer.StateColor(io, st.GetState()), reason)
	d.Field("Message", st.GetMessage())
	if q := st.GetQueue(); q != nil || sp.GetQueue() != "" {
		queue := cmp.Or(q.GetLocalQueue(), sp.GetQueue())
		if q.GetClusterQueue() != "" {
			queue += " (ClusterQueue " + q.GetClusterQueue() + ")"
		}
		if q.GetLocalQueueMissing() {
			queue += " (no such LocalQueue in this namespace: the job waits until an admin creates it; `kiln queues list` shows the queues there)"
		}
		if q.GetPositionInLocalQueue() > 0 {
			queue += fmt.Sprintf(", #%d in this queue, #%d in its ClusterQueue", q.GetPositionInLocalQueue(), q.GetPositionInClusterQueue())
		}
		if q.GetAdmitted() {
			queue += ", admitted"
		}
		d.Field("Queue", queue)
	}
	if c := st.GetCluster(); c != "" {
		d.Field("Cluster", c+" (dispatched by MultiKueue: its pods and their logs are on that cluster)")
	}
	if sp.GetPriorityClass() != "" {
		d.Field("Priority class", sp.GetPriorityClass())
	}
	if t := sp.GetTopology(); t != nil {
		mode := "required"
		if t.GetPreferred() {
			mode = "preferred"
		}
		level := t.GetLevel()
		if t.GetNodeLabel() != "" && t.GetNodeLabel() != level {
			level += " (" + t.GetNodeLabel() + ")"
		}
		d.Field("Topology", fmt.Sprintf("all training nodes in one %s, %s", level, mode))
	}
	for _, ps := range st.GetPlacement().GetPodSets() {
		d.Field("Placement", placed(st.GetPlacement(), ps))
	}
	if st.GetStartTime() != nil {
		d.Field("Started", printer.Age(now, st.GetStartTime().AsTime())+" ago")
	}
	if st.GetCompletionTime() != nil {
		d.Field("Finished", printer.Age(now, st.GetCompletionTime().AsTime())+" ago")
	}
	finished := st.GetState() == kilnv1.State_STATE_COMPLETE || st.GetState() == kilnv1.State_STATE_FAILED
	switch {
	case finished && st.ActiveDeadlineSeconds != nil:
		d.Field("Deadline", printer.Duration(time.Duration(st.GetActiveDeadlineSeconds())*time.Second)+" of running")
	case st.GetDeadlineTime() != nil:
		d.Field("Deadline", fmt.Sprintf("%s (after %s of running)", printer.Until(now, st.GetDeadlineTime().AsTime()), printer.Duration(time.Duration(st.GetActiveDeadlineSeconds())*time.Second)))
	case st.ActiveDeadlineSeconds != nil:
		d.Field("Deadline", fmt.Sprintf("after %s of running (counts while it runs)", printer.Duration(time.Duration(st.GetActiveDeadlineSeconds())*time.Second)))
	}
	switch {
	case st.GetTtlDeleteTime() != nil:
		d.Field("TTL", fmt.Sprintf("deleted %s by TTL", printer.Until(now, st.GetTtlDeleteTime().AsTime())))
	case st.TtlSecondsAfterFinished != nil:
		d.Field("TTL", fmt.Sprintf("deleted %s after it finishes", printer.Duration(time.Duration(st.GetTtlSecondsAfterFinished())*time.Second)))
	}
	if r := st.GetRestarts(); r != nil {
		restarts := fmt.Sprintf("%d (%d of maxRestarts %d counted; disruptions do not count)", r.GetCount(), r.GetCountedTowardsMax(), r.GetMaxRestarts())
		if r.GetMaxRestarts() == 0 && r.GetCountedTowardsMax() == 0 {
			// No failure policy: only Kiln restarted the job (a stall), with no budget to count.
			restarts = fmt.Sprint(r.GetCount())
		}
		if r.GetLastReason() != "" {
			restarts += ", last: " + r.GetLastReason()
			if r.GetLastRestartTime() != nil {
				restarts += " " + printer.Age(now, r.GetLastRestartTime().AsTime()) + " ago"
			}
			if r.GetLastReason() == reasonProgressStalled {
				// Kiln's own restart, which no failure policy names: say what it was.
				restarts += " (Kiln restarted it: no progress reported for its progress deadline)"
			}
		}
		d.Field("Restarts", restarts)
	}
	if kept := st.GetKeptLogAttempts(); len(kept) > 0 {
		attempts := make([]string, len(kept))
		for i, a := range kept {
			attempts[i] = fmt.Sprint(a)
		}
		d.Field("Kept logs", fmt.Sprintf("attempts %s (kiln logs %s --previous, or --attempt N)", strings.Join(attempts, ", "), j.GetName()))
	}
	progress(d, now, j, more.Metrics, more.MetricsErr)

	if tl := timeline(j, more.Events); len(tl) > 1 {
		t := printer.NewTable(io, "AGE", "WHAT", "AFTER", "DETAIL").Aligned()
		for i, m := range tl {
			after := "-"
			if i > 0 {
				after = "+" + printer.Duration(m.at.Sub(tl[i-1].at))
			}
			t.Row(printer.Age(now, m.at)+" ago", m.what, after, cmp.Or(m.detail, "-"))
		}
		d.Section("Timeline", t, nil, "")
	}
	if pl := st.GetPlacement(); len(pl.GetPodSets()) > 0 {
		cols := []string{"POD SET"}
		for _, l := range pl.GetLevels() {
			cols = append(cols, strings.ToUpper(l.GetName()))
		}
		t := printer.NewTable(io, append(cols, "PODS")...).Aligned()
		for _, ps := range pl.GetPodSets() {
			for _, dom := range ps.GetDomains() {
				row := []string{ps.GetName()}
				for i := range pl.GetLevels() {
					v := "-"
					if i < len(dom.GetValues()) && dom.GetValues()[i] != "" {
						v = dom.GetValues()[i]
					}
					row = append(row, v)
				}
				t.Row(append(row, fmt.Sprint(dom.GetPods()))...)
			}
		}
		d.Section("Placement", t, nil, "")
	}
	if len(st.GetSteps()) > 0 {
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
		d.Section("Steps", t, nil, "")
	}
	t := printer.NewTable(io, "AGE", "TYPE", "REASON", "OBJECT", "MESSAGE").Aligned()
	for _, e := range more.Events {
		age := printer.Age(now, e.GetLastTime().AsTime())
		if e.GetCount() > 1 {
			age += fmt.Sprintf(" (x%d)", e.GetCount())
		}
		t.Row(age, e.GetType(), e.GetReason(), e.GetObject(), e.GetMessage())
	}
	d.Section("Events", t, more.EventsErr, "none")
	return d.String()
}

// placed says where one pod set was placed: in one domain of each level above its nodes,
// or across how many ("node: 4 pods in block b0, rack b0-r1 (Topology default, flavor gpu-tas)").
func placed(pl *kilnv1.Placement, ps *kilnv1.PodSetPlacement) string {
	levels := pl.GetLevels()
	var where []string
	for i, l := range levels {
		if i == len(levels)-1 && len(levels) > 1 {
			break // the lowest level (nodes) is in the table
		}
		var values []string
		for _, dom := range ps.GetDomains() {
			if i < len(dom.GetValues()) && dom.GetValues()[i] != "" && !slices.Contains(values, dom.GetValues()[i]) {
				values = append(values, dom.GetValues()[i])
			}
		}
		switch len(values) {
		case 0:
		case 1:
			where = append(where, l.GetName()+" "+values[0])
		default:
			where = append(where, fmt.Sprintf("%d %ss (%s)", len(values), l.GetName(), strings.Join(values, ", ")))
		}
	}
	out := fmt.Sprintf("%s: %d pods", ps.GetName(), ps.GetCount())
	if len(where) > 0 {
		out += " in " + strings.Join(where, ", ")
	}
	out += fmt.Sprintf(" (Topology %s, flavor %s", pl.GetTopology(), ps.GetFlavor())
	if ps.GetRequiredLevel() != "" {
		out += ", one " + ps.GetRequiredLevel() + " required"
	} else if ps.GetPreferredLevel() != "" {
		out += ", one " + ps.GetPreferredLevel() + " preferred"
	}
	return out + ")"
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
