package printer

import (
	"strconv"
	"time"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

// JobTable prints jobs as `kiln list` and `kiln get` do: NAME, RUNTIME, QUEUE, STATE,
// NODES, AGE, PROGRESS, ETA, after NAMESPACE when several namespaces show, and with LOSS,
// LAST UPDATE (of the progress), REASON, STARTED, DEADLINE, TTL, SCHEDULE (of a
// schedule's run) and CLUSTER (the worker cluster MultiKueue dispatched it to) when wide. The progress columns come after AGE so that a script reading
// a pipe's columns by position finds the older ones where they were.
func JobTable(io *iostreams.IOStreams, now time.Time, js []*kilnv1.TrainJob, namespaces, wide bool) *Table {
	header := []string{"NAME", "RUNTIME", "QUEUE", "STATE", "NODES", "AGE", "PROGRESS", "ETA"}
	if namespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header, "LOSS", "LAST UPDATE", "REASON", "STARTED", "DEADLINE", "TTL", "SCHEDULE", "CLUSTER")
	}
	t := NewTable(io, header...)
	for _, j := range js {
		st := j.GetStatus()
		cells := []string{j.GetName(), j.GetSpec().GetRuntime(), Dash(j.GetSpec().GetQueue()), JobState(st), nodes(j), Age(now, j.GetCreateTime().AsTime()),
			ProgressCell(st.GetProgress()), ETACell(j)}
		colors := make([]func(string) string, len(cells))
		colors[3] = StateColor(io, st.GetState())
		if namespaces {
			cells = append([]string{j.GetNamespace()}, cells...)
			colors = append([]func(string) string{nil}, colors...)
		}
		if wide {
			started, deadline, ttl := "-", "-", "-"
			if st.GetStartTime() != nil {
				started = Age(now, st.GetStartTime().AsTime()) + " ago"
			}
			if st.GetDeadlineTime() != nil {
				deadline = Until(now, st.GetDeadlineTime().AsTime())
			}
			if st.GetTtlDeleteTime() != nil {
				ttl = Until(now, st.GetTtlDeleteTime().AsTime())
			}
			loss, updated := "-", "-"
			if v, ok := Metric(st.GetProgress(), MetricLoss); ok {
				loss = Number(v)
			}
			if u := st.GetProgress().GetUpdateTime(); u != nil {
				updated = Age(now, u.AsTime()) + " ago"
			}
			cells = append(cells, loss, updated, Dash(st.GetReason()), started, deadline, ttl, Dash(j.GetLabels()[LabelSchedule]), Dash(st.GetCluster()))
		}
		t.ColoredRow(cells, colors)
	}
	return t
}

func nodes(j *kilnv1.TrainJob) string {
	if n := j.GetSpec().GetNodes(); n > 0 {
		return strconv.Itoa(int(n))
	}
	return "-"
}

// Dash is s, or "-" when empty, as tables show a missing value.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
