package describe

import (
	"slices"
	"strconv"
	"strings"
	"time"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// moment is one step of a job's life.
type moment struct {
	at           time.Time
	what, detail string
}

// timeline is the job's life from its submission, built from the facts `kiln describe`
// already shows: its creation and status times, and the lifecycle events the operator
// records on it (the same transitions its metrics and spans count), and Kueue's for a
// queued job (the operator leaves its queueing, admission and eviction to Kueue's events).
// Events expire (an hour, by default); the status times stand in for the ones that did.
func timeline(j *kilnv1.TrainJob, events []*kilnv1.Event) []moment {
	st := j.GetStatus()
	queued := j.GetSpec().GetQueue() != "" || st.GetQueue() != nil
	var out []moment
	if j.GetCreateTime() != nil {
		out = append(out, moment{at: j.GetCreateTime().AsTime(), what: "Submitted"})
	}
	seen := map[string]bool{}
	self := "TrainJob/" + j.GetName()
	for _, e := range events {
		if e.GetObject() != self {
			continue
		}
		at := e.GetFirstTime().AsTime()
		if e.GetFirstTime() == nil {
			at = e.GetLastTime().AsTime()
		}
		m := moment{at: at}
		switch e.GetReason() {
		case "Suspended":
			m.what = "Suspended"
			if queued {
				m.what = "Queued"
			}
		case "Resumed":
			m.what = "Resumed"
			if queued {
				m.what = "Admitted"
			}
		// Kueue's, on the TrainJob: "Created Workload: ns/name", "Admitted by clusterQueue
		// cq", and why it stopped the job ("Preempted to accommodate ...").
		case "CreatedWorkload":
			m.what = "Queued"
		case "Started":
			m.what = "Admitted"
		case "Stopped":
			m.what, m.detail = "Evicted", firstClause(e.GetMessage())
		case "Running":
			m.what = "Running"
		case "Restarted":
			m.what, m.detail = "Restarted", restartDetail(e.GetMessage())
		case "Completed":
			m.what = "Completed"
		case "Failed", "DeadlineExceeded", "ProgressDeadlineExceeded", "JobSetRejected":
			m.what, m.detail = "Failed", e.GetReason()
		case "TTLExpired":
			m.what = "Deleted by TTL"
		default:
			continue
		}
		seen[m.what] = true
		out = append(out, m)
		// Kubernetes counts a repeated event in one series: its first and its latest time.
		if e.GetCount() > 1 && e.GetLastTime() != nil {
			again := m
			again.at = e.GetLastTime().AsTime()
			again.detail = strings.TrimPrefix(again.detail+", ", ", ") + strconv.Itoa(int(e.GetCount())) + " times in all"
			out = append(out, again)
		}
	}
	// Status times for the events no longer there.
	if st.GetStartTime() != nil && !seen["Admitted"] && !seen["Resumed"] && !seen["Running"] {
		out = append(out, moment{at: st.GetStartTime().AsTime(), what: "Started"})
	}
	if st.GetCompletionTime() != nil && !seen["Completed"] && !seen["Failed"] {
		what := "Finished"
		switch st.GetState() {
		case kilnv1.State_STATE_COMPLETE:
			what = "Completed"
		case kilnv1.State_STATE_FAILED:
			what = "Failed"
		}
		out = append(out, moment{at: st.GetCompletionTime().AsTime(), what: what, detail: st.GetReason()})
	}
	slices.SortStableFunc(out, func(a, b moment) int { return a.at.Compare(b.at) })
	return out
}

// firstClause is a message up to its first parenthesis, semicolon or period, at most 60
// characters: what a timeline row has room for.
func firstClause(msg string) string {
	if i := strings.IndexAny(msg, "(;."); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(msg)
	if len(msg) > 60 {
		msg = msg[:57] + "..."
	}
	return msg
}

// restartDetail shortens a Restarted event ("restarting all pods (restart 1; not counted
// against maxRestarts, 0 of 3 used): Disruption: ...") to its reason and budget.
func restartDetail(msg string) string {
	counted := "counted"
	if strings.Contains(msg, "not counted") {
		counted = "not counted"
	}
	if _, rest, ok := strings.Cut(msg, "): "); ok {
		reason, _, _ := strings.Cut(rest, ":")
		return reason + ", " + counted
	}
	return counted
}
