package service

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

// metricsPoll is how often WatchTrainJobMetrics looks for a new report: the operator's
// status server writes a job's latest report at most every second. historyPoll is how
// often it reads the history again, for the reports that never showed as the latest (the
// status server writes a job's history at most every 10 s).
const (
	metricsPoll = time.Second
	historyPoll = 10 * time.Second
)

// newerPoints returns the points of h later than those already sent (by series, in sent:
// by time, then by step within a second), and records them as sent.
func newerPoints(h *kilnv1.GetTrainJobMetricsResponse, sent map[string]pointKey) []*kilnv1.MetricSeries {
	var out []*kilnv1.MetricSeries
	for _, s := range h.GetSeries() {
		after, seen := sent[s.GetName()]
		var pts []*kilnv1.MetricPoint
		for _, p := range s.GetPoints() {
			if k := keyOf(p); !seen || k.after(after) {
				pts = append(pts, p)
			}
		}
		if len(pts) == 0 {
			continue
		}
		sent[s.GetName()] = keyOf(pts[len(pts)-1])
		out = append(out, &kilnv1.MetricSeries{Name: s.GetName(), Stride: s.GetStride(), Points: pts})
	}
	return out
}

// pointKey orders a series' points: by time (whole seconds), then by step.
type pointKey struct {
	time time.Time
	step int64
}

func keyOf(p *kilnv1.MetricPoint) pointKey {
	step := int64(-1)
	if p.Step != nil {
		step = p.GetStep()
	}
	return pointKey{time: p.GetTime().AsTime(), step: step}
}

func (k pointKey) after(o pointKey) bool {
	return k.time.After(o.time) || (k.time.Equal(o.time) && k.step > o.step)
}

// GetTrainJobMetrics implements kilnv1connect.TrainJobServiceHandler. The history
// (TrainJobMetrics) is read as the caller.
func (s *TrainJobs) GetTrainJobMetrics(ctx context.Context, req *connect.Request[kilnv1.GetTrainJobMetricsRequest]) (*connect.Response[kilnv1.GetTrainJobMetricsResponse], error) {
	m := req.Msg
	if errs := validateRef(m.GetNamespace(), m.GetName()); len(errs) > 0 {
		return nil, invalid(errs)
	}
	tj, err := s.get(ctx, m.GetNamespace(), m.GetName())
	if err != nil {
		return nil, err
	}
	h, err := s.history(ctx, tj)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(view.MetricHistory(h, tj, m.GetMetrics())), nil
}

// history reads a job's TrainJobMetrics as the caller: nil when there is none yet.
func (s *TrainJobs) history(ctx context.Context, tj *trainer.TrainJob) (*kiln.TrainJobMetrics, error) {
	h := &kiln.TrainJobMetrics{}
	err := s.kube.AsCaller.Get(ctx, client.ObjectKeyFromObject(tj), h)
	switch {
	case apierrors.IsNotFound(err), err == nil && !metav1.IsControlledBy(h, tj):
		// None yet; or left by a deleted job of the same name.
		return nil, nil
	case err != nil:
		return nil, toConnect(fmt.Sprintf("getting the metrics history of TrainJob %s/%s", tj.Namespace, tj.Name), err)
	}
	return h, nil
}

// WatchTrainJobMetrics implements kilnv1connect.TrainJobServiceHandler: the history, then
// the points of each new report, and every historyPoll the history's points not sent yet
// (reports coalesced between two status writes), until the job finishes.
func (s *TrainJobs) WatchTrainJobMetrics(ctx context.Context, req *connect.Request[kilnv1.WatchTrainJobMetricsRequest], stream *connect.ServerStream[kilnv1.WatchTrainJobMetricsResponse]) error {
	m := req.Msg
	if errs := validateRef(m.GetNamespace(), m.GetName()); len(errs) > 0 {
		return invalid(errs)
	}
	tj, err := s.get(ctx, m.GetNamespace(), m.GetName())
	if err != nil {
		return err
	}
	h, err := s.history(ctx, tj)
	if err != nil {
		return err
	}
	first := view.MetricHistory(h, tj, m.GetMetrics())
	if err := stream.Send(&kilnv1.WatchTrainJobMetricsResponse{Event: &kilnv1.WatchTrainJobMetricsResponse_History{History: first}}); err != nil {
		return err
	}
	var last time.Time
	if ts := tj.Status.TrainerStatus; ts != nil {
		last = ts.LastUpdatedTime.Time
	}
	wanted := map[string]bool{}
	for _, n := range m.GetMetrics() {
		wanted[n] = true
	}
	// The history's points already sent, by series: reports the status server coalesced
	// (several within a second) show only in the history, read again every historyPoll.
	stored := map[string]pointKey{}
	newerPoints(view.MetricHistory(h, nil, m.GetMetrics()), stored)
	version := ""
	if h != nil {
		version = h.ResourceVersion
	}
	tick := time.NewTicker(metricsPoll)
	defer tick.Stop()
	for polls := 1; ; polls++ {
		if view.Finished(tj) {
			st := s.views.view(ctx, tj, viewOptions{}).GetStatus()
			return stream.Send(&kilnv1.WatchTrainJobMetricsResponse{Event: &kilnv1.WatchTrainJobMetricsResponse_Finished{Finished: st}})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.stopping():
			return errShuttingDown
		case <-tick.C:
		}
		if tj, err = s.get(ctx, m.GetNamespace(), m.GetName()); err != nil {
			return err
		}
		if polls%int(historyPoll/metricsPoll) == 0 {
			h, err := s.history(ctx, tj)
			if err != nil {
				return err
			}
			if h != nil && h.ResourceVersion != version {
				version = h.ResourceVersion
				if series := newerPoints(view.MetricHistory(h, nil, m.GetMetrics()), stored); len(series) > 0 {
					if err := stream.Send(&kilnv1.WatchTrainJobMetricsResponse{Event: &kilnv1.WatchTrainJobMetricsResponse_Points{Points: &kilnv1.MetricPoints{Series: series}}}); err != nil {
						return err
					}
				}
			}
		}
		ts := tj.Status.TrainerStatus
		if ts == nil || !ts.LastUpdatedTime.After(last) {
			continue
		}
		last = ts.LastUpdatedTime.Time
		var series []*kilnv1.MetricSeries
		for _, p := range view.LatestPoints(tj) {
			if len(wanted) == 0 || wanted[p.Name] {
				series = append(series, p)
			}
		}
		if len(series) == 0 {
			continue
		}
		if err := stream.Send(&kilnv1.WatchTrainJobMetricsResponse{Event: &kilnv1.WatchTrainJobMetricsResponse_Points{Points: &kilnv1.MetricPoints{Series: series}}}); err != nil {
			return err
		}
	}
}
