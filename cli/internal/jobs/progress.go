// Package jobs holds what several commands show of a job: its progress while they wait for
// it (the wait itself is the Go SDK's WatchJob), its one-line summary, and its logs.
package jobs

import (
	"fmt"
	"strings"
	"time"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Finished reports whether a job completed or failed.
func Finished(j *kilnv1.TrainJob) bool {
	s := j.GetStatus().GetState()
	return s == kilnv1.State_STATE_COMPLETE || s == kilnv1.State_STATE_FAILED
}

// Progress draws a job's progress on one line of a terminal, rewriting it in place.
type Progress struct {
	IO  *iostreams.IOStreams
	Now func() time.Time
	len int
}

// Show draws the line for j (nothing unless standard error is a terminal).
func (p *Progress) Show(j *kilnv1.TrainJob) {
	if !p.IO.IsErrTTY() {
		return
	}
	line := Summary(p.IO, j, p.Now())
	fmt.Fprintf(p.IO.ErrOut, "\r%s\x1b[K", line)
	p.len = len(line)
}

// Done ends the line.
func (p *Progress) Done() {
	if p.IO.IsErrTTY() && p.len > 0 {
		fmt.Fprint(p.IO.ErrOut, "\r\x1b[K")
		p.len = 0
	}
}

// Summary is one line about a job: its state, why, and the next timer.
func Summary(io *iostreams.IOStreams, j *kilnv1.TrainJob, now time.Time) string {
	st := j.GetStatus()
	var b strings.Builder
	b.WriteString(j.GetName() + ": " + printer.StateColor(io, st.GetState())(printer.StateName(st.GetState())))
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
