// Package jobs holds what several commands show of a job: its progress while they wait for
// it (the wait itself is the Go SDK's WatchJob), its one-line summary, and its logs.
package jobs

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Finished reports whether a job completed or failed.
func Finished(j *kilnv1.TrainJob) bool {
	s := j.GetStatus().GetState()
	return s == kilnv1.State_STATE_COMPLETE || s == kilnv1.State_STATE_FAILED
}

// Progress shows a job's progress while a command waits for it. On a terminal it draws one
// line of standard error, rewriting it in place: the job's summary, or once its trainer
// reports, a bar with the percent, step, loss and ETA. In a pipe (a CI log) it writes a
// plain line of the trainer's progress only when the state changes or, at most every
// plainEvery, the whole percent does; a job that does not report writes nothing there, so
// that a script reading standard error sees what it saw before trainers reported.
type Progress struct {
	IO  *iostreams.IOStreams
	Now func() time.Time
	len int
	// What the last plain line said, and when.
	plain     bool
	state     kilnv1.State
	percent   int32
	plainTime time.Time
}

// plainEvery is how often, at most, a pipe gets a line for a new percent.
const plainEvery = 10 * time.Second

// barWidth is the width of the bar between its brackets.
const barWidth = 20

// Show draws the line for j.
func (p *Progress) Show(j *kilnv1.TrainJob) {
	if !p.IO.IsErrTTY() {
		p.showPlain(j)
		return
	}
	line := Summary(p.IO, j, p.Now())
	if j.GetStatus().GetProgress() != nil {
		line = progressLine(p.IO, j, true, p.IO.Width()-1)
	}
	fmt.Fprintf(p.IO.ErrOut, "\r%s\x1b[K", line)
	p.len = len(line)
}

// showPlain writes a line to a pipe when the state or the percent has changed since the
// last one (a percent no sooner than plainEvery after it).
func (p *Progress) showPlain(j *kilnv1.TrainJob) {
	st, pr := j.GetStatus(), j.GetStatus().GetProgress()
	if pr == nil {
		return
	}
	now := p.Now()
	changed := !p.plain || st.GetState() != p.state
	if pr.Percent != nil && pr.GetPercent() != p.percent && now.Sub(p.plainTime) >= plainEvery {
		changed = true
	}
	if !changed {
		return
	}
	fmt.Fprintln(p.IO.ErrOut, progressLine(p.IO, j, false, 0))
	p.plain, p.state, p.percent, p.plainTime = true, st.GetState(), pr.GetPercent(), now
	if pr.Percent == nil {
		p.percent = -1
	}
}

// Done ends the line.
func (p *Progress) Done() {
	if p.IO.IsErrTTY() && p.len > 0 {
		fmt.Fprint(p.IO.ErrOut, "\r\x1b[K")
		p.len = 0
	}
}

// progressLine is a reporting job on one line: its name, state, a bar (when asked), the
// percent, step, loss and ETA, as many as fit in width (0: all). A line longer than the
// terminal wraps, and then \r no longer rewrites it: the loss goes first, then the step,
// the ETA and the bar; the name, state and percent stay.
func progressLine(io *iostreams.IOStreams, j *kilnv1.TrainJob, bar bool, width int) string {
	st, pr := j.GetStatus(), j.GetStatus().GetProgress()
	// Each part with its rank: the lowest goes first; 0 never goes.
	type part struct {
		text string
		rank int
	}
	parts := []part{{j.GetName(), 0}, {printer.JobState(st), 0}}
	if pr.Percent != nil {
		if bar {
			parts = append(parts, part{printer.Bar(pr.GetPercent(), barWidth), 4})
		}
		parts = append(parts, part{fmt.Sprintf("%d%%", pr.GetPercent()), 0})
	}
	switch {
	case pr.Step != nil && pr.TotalSteps != nil:
		parts = append(parts, part{fmt.Sprintf("step %d/%d", pr.GetStep(), pr.GetTotalSteps()), 2})
	case pr.Step != nil:
		parts = append(parts, part{fmt.Sprintf("step %d", pr.GetStep()), 2})
	}
	if v, ok := printer.Metric(pr, printer.MetricLoss); ok {
		parts = append(parts, part{"loss " + printer.Number(v), 1})
	}
	if eta := printer.ETACell(j); eta != "-" {
		parts = append(parts, part{"ETA " + eta, 3})
	}
	join := func() string {
		texts := make([]string, len(parts))
		for i, p := range parts {
			texts[i] = p.text
		}
		return strings.Join(texts, "  ")
	}
	for width > 0 && utf8.RuneCountInString(join()) > width {
		lowest := -1
		for i, p := range parts {
			if p.rank > 0 && (lowest < 0 || p.rank < parts[lowest].rank) {
				lowest = i
			}
		}
		if lowest < 0 {
			break
		}
		parts = slices.Delete(parts, lowest, lowest+1)
	}
	// Coloured last: the colour's escapes take no room on the terminal.
	parts[1].text = printer.StateColor(io, st.GetState())(parts[1].text)
	return join()
}

// Summary is one line about a job: its state, why, and the next timer.
func Summary(io *iostreams.IOStreams, j *kilnv1.TrainJob, now time.Time) string {
	st := j.GetStatus()
	var b strings.Builder
	b.WriteString(j.GetName() + ": " + printer.StateColor(io, st.GetState())(printer.JobState(st)))
	if st.GetReason() != "" {
		b.WriteString(" (" + st.GetReason() + ")")
	}
	if q := st.GetQueue(); st.GetState() == kilnv1.State_STATE_QUEUED && q.GetPositionInLocalQueue() > 0 {
		fmt.Fprintf(&b, ", #%d in queue %s", q.GetPositionInLocalQueue(), q.GetLocalQueue())
	}
	var ready, total int32
	for _, rj := range st.GetJobs() {
		ready += rj.GetReady() + rj.GetSucceeded()
		total += rj.GetActive() + rj.GetSucceeded()
	}
	if st.GetState() == kilnv1.State_STATE_RUNNING && total > 0 {
		fmt.Fprintf(&b, ", %d/%d jobs ready", ready, total)
	}
	if st.GetDeadlineTime() != nil {
		b.WriteString(", deadline " + printer.Until(now, st.GetDeadlineTime().AsTime()))
	}
	if st.GetMessage() != "" && st.GetState() != kilnv1.State_STATE_RUNNING {
		b.WriteString(": " + st.GetMessage())
	}
	return b.String()
}
