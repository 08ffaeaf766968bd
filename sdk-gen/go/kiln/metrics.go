package kiln

import (
	"context"
	"iter"
	"time"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// Progress is what a job's trainer last reported (the TrainJob's status.trainerStatus),
// with what Kiln reads from it; docs/sdk.md#progress-and-metrics.
type Progress struct {
	// Percent (0 to 100) and ETASeconds (the trainer's estimate of the training time left),
	// nil when the trainer does not know them.
	Percent, ETASeconds *int32
	// Step and TotalSteps, from the metrics of those names; nil when not reported.
	Step, TotalSteps *int64
	// Metrics are the latest values as reported (strings), in the trainer's order.
	Metrics []Metric
	// UpdateTime is when the trainer observed this.
	UpdateTime time.Time
	// Checkpoint is the newest checkpoint the trainer reported; nil before the first.
	Checkpoint *Checkpoint
	// ProgressDeadlineSeconds is the job's kiln.dev/progress-deadline: how long it may go
	// without reporting before Kiln restarts it once, then fails it. StallTime is when that
	// falls due if the job stays silent (nil while it does not run).
	ProgressDeadlineSeconds *int64
	StallTime               *time.Time
}

// Metric is one reported metric, e.g. loss = "0.5321".
type Metric struct {
	Name, Value string
}

// Checkpoint is a checkpoint the trainer saved: its step and where.
type Checkpoint struct {
	Step int64
	Path string
}

// Metric returns the latest value reported for a metric.
func (p *Progress) Metric(name string) (string, bool) {
	if p == nil {
		return "", false
	}
	for _, m := range p.Metrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return "", false
}

// progressOf is the API's progress as this package has it; nil stays nil (not reported).
func progressOf(p *kilnv1.Progress) *Progress {
	if p == nil {
		return nil
	}
	out := &Progress{
		Percent: p.Percent, ETASeconds: p.EtaSeconds, Step: p.Step, TotalSteps: p.TotalSteps,
		UpdateTime:              p.GetUpdateTime().AsTime(),
		ProgressDeadlineSeconds: p.ProgressDeadlineSeconds,
		StallTime:               timeOf(p.GetStallTime(), p.GetStallTime() != nil),
	}
	for _, m := range p.GetMetrics() {
		out.Metrics = append(out.Metrics, Metric{Name: m.GetName(), Value: m.GetValue()})
	}
	if c := p.GetCheckpoint(); c != nil {
		out.Checkpoint = &Checkpoint{Step: c.GetStep(), Path: c.GetPath()}
	}
	return out
}

// metricsOf are the latest metric values by name (nil before the trainer reports).
func metricsOf(p *kilnv1.Progress) map[string]string {
	if p == nil {
		return nil
	}
	out := make(map[string]string, len(p.GetMetrics()))
	for _, m := range p.GetMetrics() {
		out[m.GetName()] = m.GetValue()
	}
	return out
}

// MetricPoint is one value of a metric: when the trainer reported it, at which step (nil
// when it reported none), and the value.
type MetricPoint struct {
	Time  time.Time
	Step  *int64
	Value float64
}

// pointsOf are the series' points by metric name.
func pointsOf(series []*kilnv1.MetricSeries) map[string][]MetricPoint {
	out := make(map[string][]MetricPoint, len(series))
	for _, s := range series {
		points := make([]MetricPoint, 0, len(s.GetPoints()))
		for _, p := range s.GetPoints() {
			points = append(points, MetricPoint{Time: p.GetTime().AsTime(), Step: p.Step, Value: p.GetValue()})
		}
		out[s.GetName()] = append(out[s.GetName()], points...)
	}
	return out
}

// GetJobMetrics returns the history of the numeric metrics a job's trainer reported, by
// name, oldest point first: at most 500 points a metric, spread evenly over the whole run,
// then the latest value. metrics names those wanted (none: all); namespace "" is the
// client's.
func (c *Client) GetJobMetrics(ctx context.Context, namespace, name string, metrics ...string) (map[string][]MetricPoint, error) {
	var res *connect.Response[kilnv1.GetTrainJobMetricsResponse]
	err := retry(ctx, func() (err error) {
		res, err = c.Jobs.GetTrainJobMetrics(ctx, connect.NewRequest(&kilnv1.GetTrainJobMetricsRequest{Namespace: c.ns(namespace), Name: name, Metrics: metrics}))
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	return pointsOf(res.Msg.GetSeries()), nil
}

// WatchJobMetrics streams a job's metrics (those named, or all): first their whole
// history, then the points of each new report as it arrives, by metric name. It ends when
// the job has completed or failed, or when the loop stops. A stream that drops is opened
// again (after 100 ms, doubling up to 5 s while it keeps dropping): its history comes
// again, and only the points newer than those already yielded are, so that the points
// yielded are each new. Another error ends it, yielded as a *Error (ctx's end as ctx.Err()).
func (c *Client) WatchJobMetrics(ctx context.Context, namespace, name string, metrics ...string) iter.Seq2[map[string][]MetricPoint, error] {
	return func(yield func(map[string][]MetricPoint, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := &metricsWatch{last: map[string]time.Time{}, yield: yield}
		req := &kilnv1.WatchTrainJobMetricsRequest{Namespace: c.ns(namespace), Name: name, Metrics: metrics}
		backoff := backoffMin
		for {
			done, err := w.once(ctx, c, req)
			if done {
				return
			}
			if ctx.Err() != nil {
				yield(nil, ctx.Err())
				return
			}
			if err != nil && !transient(ctx, err) && connect.CodeOf(err) != connect.CodeUnknown {
				yield(nil, wrap(err))
				return
			}
			select {
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, backoffMax)
		}
	}
}

// metricsWatch is a WatchJobMetrics under way: the newest point yielded of each metric
// (what a history sent again after a drop is cut to), and where the points go.
type metricsWatch struct {
	last    map[string]time.Time
	started bool
	yield   func(map[string][]MetricPoint, error) bool
}

// once follows one stream; done says the watch is over (the job finished, or the loop
// stopped); otherwise err is why the stream ended (nil: it just ended).
func (w *metricsWatch) once(ctx context.Context, c *Client, req *kilnv1.WatchTrainJobMetricsRequest) (bool, error) {
	stream, err := c.Jobs.WatchTrainJobMetrics(ctx, connect.NewRequest(req))
	if err != nil {
		return false, err
	}
	defer func() { _ = stream.Close() }()
	for stream.Receive() {
		var points map[string][]MetricPoint
		switch ev := stream.Msg().GetEvent().(type) {
		case *kilnv1.WatchTrainJobMetricsResponse_Finished:
			return true, nil
		case *kilnv1.WatchTrainJobMetricsResponse_History:
			points = pointsOf(ev.History.GetSeries())
		case *kilnv1.WatchTrainJobMetricsResponse_Points:
			points = pointsOf(ev.Points.GetSeries())
		default:
			continue // an event of a newer server
		}
		if fresh := w.fresh(points); len(fresh) > 0 || !w.started {
			// The first history is yielded even when empty: the caller learns the watch is on.
			w.started = true
			if !w.yield(fresh, nil) {
				return true, nil
			}
		}
	}
	return false, stream.Err()
}

// fresh keeps the points newer than the last yielded of their metric, and moves that on.
func (w *metricsWatch) fresh(points map[string][]MetricPoint) map[string][]MetricPoint {
	out := map[string][]MetricPoint{}
	for name, ps := range points {
		for _, p := range ps {
			if last, ok := w.last[name]; ok && !p.Time.After(last) {
				continue
			}
			out[name] = append(out[name], p)
			w.last[name] = p.Time
		}
	}
	return out
}
