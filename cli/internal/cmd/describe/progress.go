package describe

import (
	"fmt"
	"math"
	"strings"
	"time"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// reasonProgressStalled is the restart reason of a job Kiln restarted because it stopped
// reporting progress for its kiln.dev/progress-deadline.
const reasonProgressStalled = "ProgressStalled"

// The widths of what the Progress section draws: the bar, the curve, and the values
// column (80 less the description's name column).
const (
	barWidth    = 20
	curveWidth  = 60
	valuesWidth = 80 - nameWidth
)

// progress writes the Progress section of a job whose trainer reported: how far it is,
// when it reported last and what happens if it stops, its latest metrics and checkpoint,
// and the curve of its loss. Nothing before it reports.
func progress(d *printer.Description, now time.Time, j *kilnv1.TrainJob, metrics *kilnv1.GetTrainJobMetricsResponse, metricsErr error) {
	p := j.GetStatus().GetProgress()
	if p == nil {
		return
	}
	d.Heading("Progress")
	if p.Percent != nil {
		d.SubField("Percent", fmt.Sprintf("%d%% %s", p.GetPercent(), printer.Bar(p.GetPercent(), barWidth)))
	}
	switch {
	case p.Step != nil && p.TotalSteps != nil:
		d.SubField("Step", fmt.Sprintf("%d of %d", p.GetStep(), p.GetTotalSteps()))
	case p.Step != nil:
		d.SubField("Step", fmt.Sprint(p.GetStep()))
	}
	if eta := printer.ETACell(j); eta != "-" {
		d.SubField("ETA", eta)
	}
	if p.GetUpdateTime() != nil {
		d.SubField("Last update", printer.Age(now, p.GetUpdateTime().AsTime())+" ago")
	}
	d.SubField("Deadline", progressDeadline(now, j))
	var pairs []string
	for _, m := range p.GetMetrics() {
		pairs = append(pairs, m.GetName()+"="+m.GetValue())
	}
	d.SubField("Metrics", wrap(pairs, valuesWidth)...)
	if c := p.GetCheckpoint(); c != nil {
		d.SubField("Checkpoint", strings.TrimSuffix(fmt.Sprintf("step %d, %s", c.GetStep(), c.GetPath()), ", "))
	}
	d.SubField("Curve", curve(metrics, metricsErr)...)
}

// progressDeadline says what the job's kiln.dev/progress-deadline does to it: when a
// silence restarts it (or, after one such restart, fails it). A job that is not running
// has no stall time: its silence does not count then; a finished job has the limit only.
func progressDeadline(now time.Time, j *kilnv1.TrainJob) string {
	p := j.GetStatus().GetProgress()
	if p.ProgressDeadlineSeconds == nil {
		return ""
	}
	limit := printer.Duration(time.Duration(p.GetProgressDeadlineSeconds())*time.Second) + " without a report"
	// The first stall restarts the job, the next fails it. The API says which comes next
	// only through the last restart's reason (another restart since would hide it).
	action, again := "restarts", ""
	if j.GetStatus().GetRestarts().GetLastReason() == reasonProgressStalled {
		action, again = "fails", ", as it was restarted once already for its silence"
	}
	stall := p.GetStallTime()
	switch st := j.GetStatus().GetState(); {
	case st == kilnv1.State_STATE_COMPLETE || st == kilnv1.State_STATE_FAILED:
		return limit
	case stall == nil:
		return limit + " restarts the job once, then fails it (counted while it runs)"
	case stall.AsTime().After(now):
		return fmt.Sprintf("%s: Kiln %s the job at %s (%s) if it stays silent%s", limit, action, clock(now, stall.AsTime()), printer.Until(now, stall.AsTime()), again)
	}
	return fmt.Sprintf("%s: silent past it since %s (%s); Kiln %s the job%s", limit, clock(now, stall.AsTime()), printer.Until(now, stall.AsTime()), action, again)
}

// clock is t as a wall clock reads it where now is: 10:42, with the date when not today.
func clock(now, t time.Time) string {
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04")
	}
	return t.Format("Jan 2 15:04")
}

// wrap joins items with ", " into lines of at most width (an item longer than that on a
// line of its own).
func wrap(items []string, width int) []string {
	var lines []string
	line := ""
	for i, it := range items {
		if i < len(items)-1 {
			it += ","
		}
		switch {
		case line == "":
			line = it
		case len(line)+1+len(it) <= width:
			line += " " + it
		default:
			lines = append(lines, line)
			line = it
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// curve is the loss curve's lines (or the first metric's, for a trainer that reports no
// loss): what it is with its lowest and latest values, then its sparkline; or one line
// saying why there is none.
func curve(m *kilnv1.GetTrainJobMetricsResponse, err error) []string {
	if err != nil {
		return []string{"(not shown: " + whyNoCurve(err) + ")"}
	}
	s := curveSeries(m.GetSeries())
	var values []float64
	for _, pt := range s.GetPoints() {
		if v := pt.GetValue(); !math.IsNaN(v) && !math.IsInf(v, 0) {
			values = append(values, v)
		}
	}
	if len(values) == 0 {
		return []string{"none yet: no numeric metric reported"}
	}
	lowest := values[0]
	for _, v := range values {
		lowest = min(lowest, v)
	}
	what := fmt.Sprintf("%s, min %s, last %s", s.GetName(), printer.Float(lowest), printer.Float(values[len(values)-1]))
	if first, last := s.GetPoints()[0], s.GetPoints()[len(s.GetPoints())-1]; first.Step != nil && last.Step != nil {
		what += fmt.Sprintf(", steps %d to %d", first.GetStep(), last.GetStep())
	}
	return []string{what, printer.Sparkline(values, curveWidth)}
}

// curveSeries is the loss, else the first metric with points.
func curveSeries(series []*kilnv1.MetricSeries) *kilnv1.MetricSeries {
	var first *kilnv1.MetricSeries
	for _, s := range series {
		if len(s.GetPoints()) == 0 {
			continue
		}
		if s.GetName() == printer.MetricLoss {
			return s
		}
		if first == nil {
			first = s
		}
	}
	return first
}

// whyNoCurve words an error of GetTrainJobMetrics; a server older than the call says so
// (factory.Message would name a server URL describe does not have at hand).
func whyNoCurve(err error) string {
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		return "this API server keeps no metric history; it is older than this kiln"
	}
	return factory.Message(err, "")
}
