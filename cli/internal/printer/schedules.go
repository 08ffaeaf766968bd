package printer

import (
	"strconv"
	"strings"
	"time"
	// The IANA time zone database, built in, for a schedule's next run in its own time zone
	// on machines without one (Windows, minimal containers).
	_ "time/tzdata"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

// What a schedule's run carries (kiln.dev/v1alpha1; the CLI does not import the Kubernetes types).
const (
	LabelSchedule           = "kiln.dev/cron-train-job"
	AnnotationScheduledTime = "kiln.dev/scheduled-time"
	AnnotationTriggeredBy   = "kiln.dev/triggered-by"
)

// ScheduleTable prints schedules as `kiln schedules list` does, like `kubectl get cronjobs`:
// NAME, SCHEDULE, TIMEZONE, SUSPEND, ACTIVE, LAST SCHEDULE, NEXT, AGE, after NAMESPACE when
// several namespaces show, and with POLICY, RUNTIME and QUEUE when wide.
func ScheduleTable(io *iostreams.IOStreams, now time.Time, cs []*kilnv1.CronTrainJob, namespaces, wide bool) *Table {
	header := []string{"NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "NEXT", "AGE"}
	if namespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header, "POLICY", "RUNTIME", "QUEUE")
	}
	t := NewTable(io, header...)
	for _, c := range cs {
		spec, st := c.GetSpec(), c.GetStatus()
		last, next := "-", "-"
		if st.GetLastScheduleTime() != nil {
			last = Age(now, st.GetLastScheduleTime().AsTime()) + " ago"
		}
		if st.GetNextScheduleTime() != nil {
			next = Until(now, st.GetNextScheduleTime().AsTime())
		}
		cells := []string{c.GetName(), spec.GetSchedule(), Dash(spec.GetTimeZone()), strconv.FormatBool(spec.GetSuspend()),
			strconv.Itoa(len(st.GetActive())), last, next, Age(now, c.GetCreateTime().AsTime())}
		if namespaces {
			cells = append([]string{c.GetNamespace()}, cells...)
		}
		if wide {
			run := spec.GetTrainJob().GetSpec()
			cells = append(cells, PolicyName(spec.GetConcurrencyPolicy()), run.GetRuntime(), Dash(run.GetQueue()))
		}
		t.Row(cells...)
	}
	return t
}

// PolicyName is a concurrency policy as a CronTrainJob spells it: Allow, Forbid, Replace.
func PolicyName(p kilnv1.ConcurrencyPolicy) string {
	switch p {
	case kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID:
		return "Forbid"
	case kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_REPLACE:
		return "Replace"
	}
	return "Allow"
}

// NextRun says when a schedule runs next, in its own time zone: "Next run: Sun
// 2026-11-29 02:00 CET (in 4d)", or that it is suspended.
func NextRun(c *kilnv1.CronTrainJob, now time.Time) string {
	if c.GetSpec().GetSuspend() {
		return "Suspended: no runs until `kiln schedules resume " + c.GetName() + "`."
	}
	next := c.GetStatus().GetNextScheduleTime()
	if next == nil {
		return "No next run: see `kiln schedules describe " + c.GetName() + "`."
	}
	loc := time.UTC
	if tz := c.GetSpec().GetTimeZone(); tz != "" {
		if l, err := time.LoadLocation(tz); err == nil {
			loc = l
		}
	}
	at := next.AsTime().In(loc)
	return "Next run: " + strings.TrimSpace(at.Format("Mon 2006-01-02 15:04 MST")) + " (" + Until(now, at) + ")."
}
