package kiln

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// fakeMetrics answers GetTrainJobMetrics with history (after failing fails times with
// Unavailable), and the n-th WatchTrainJobMetrics with streams[n]: its events, then its
// error; it keeps the requests.
type fakeMetrics struct {
	kilnv1connect.UnimplementedTrainJobServiceHandler
	mu      sync.Mutex
	history *kilnv1.GetTrainJobMetricsResponse
	fails   int
	gets    []*kilnv1.GetTrainJobMetricsRequest
	streams []metricsStream
	watches []*kilnv1.WatchTrainJobMetricsRequest
}

type metricsStream struct {
	events []*kilnv1.WatchTrainJobMetricsResponse
	err    error
}

func (f *fakeMetrics) GetTrainJobMetrics(_ context.Context, req *connect.Request[kilnv1.GetTrainJobMetricsRequest]) (*connect.Response[kilnv1.GetTrainJobMetricsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets = append(f.gets, req.Msg)
	if len(f.gets) <= f.fails {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("restarting"))
	}
	return connect.NewResponse(f.history), nil
}

func (f *fakeMetrics) WatchTrainJobMetrics(_ context.Context, req *connect.Request[kilnv1.WatchTrainJobMetricsRequest], stream *connect.ServerStream[kilnv1.WatchTrainJobMetricsResponse]) error {
	f.mu.Lock()
	n := len(f.watches)
	f.watches = append(f.watches, req.Msg)
	f.mu.Unlock()
	if n >= len(f.streams) {
		return connect.NewError(connect.CodeInternal, errors.New("no more streams"))
	}
	for _, ev := range f.streams[n].events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return f.streams[n].err
}

func metricsClient(t *testing.T, f *fakeMetrics) *Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(kilnv1connect.NewTrainJobServiceHandler(f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(Options{Server: srv.URL, Namespace: "team-a", ConfigFile: filepath.Join(t.TempDir(), "none.yaml"), HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// loss is a series of the loss at the given seconds after t0, each at step 10 times it.
func loss(seconds ...int) *kilnv1.MetricSeries {
	s := &kilnv1.MetricSeries{Name: "loss", Stride: 1}
	for _, sec := range seconds {
		step := int64(10 * sec)
		s.Points = append(s.Points, &kilnv1.MetricPoint{Time: timestamppb.New(t0.Add(time.Duration(sec) * time.Second)), Step: &step, Value: 3 - float64(sec)/10})
	}
	return s
}

// points are loss's points as the SDK has them.
func points(seconds ...int) []MetricPoint {
	var out []MetricPoint
	for _, sec := range seconds {
		step := int64(10 * sec)
		out = append(out, MetricPoint{Time: t0.Add(time.Duration(sec) * time.Second), Step: &step, Value: 3 - float64(sec)/10})
	}
	return out
}

func history(series ...*kilnv1.MetricSeries) *kilnv1.WatchTrainJobMetricsResponse {
	return &kilnv1.WatchTrainJobMetricsResponse{Event: &kilnv1.WatchTrainJobMetricsResponse_History{History: &kilnv1.GetTrainJobMetricsResponse{Series: series}}}
}

func newPoints(series ...*kilnv1.MetricSeries) *kilnv1.WatchTrainJobMetricsResponse {
	return &kilnv1.WatchTrainJobMetricsResponse{Event: &kilnv1.WatchTrainJobMetricsResponse_Points{Points: &kilnv1.MetricPoints{Series: series}}}
}

var finished = &kilnv1.WatchTrainJobMetricsResponse{Event: &kilnv1.WatchTrainJobMetricsResponse_Finished{Finished: &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_COMPLETE}}}

// A job's progress is the API's, typed; a job that never reported has none.
func TestJobProgress(t *testing.T) {
	pct, eta, step, total, deadline := int32(45), int32(190), int64(450), int64(1000), int64(900)
	j := jobOf(&kilnv1.TrainJob{Name: "llm", Status: &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_RUNNING, Progress: &kilnv1.Progress{
		Percent: &pct, EtaSeconds: &eta, Step: &step, TotalSteps: &total, UpdateTime: timestamppb.New(t0),
		Metrics:    []*kilnv1.Metric{{Name: "step", Value: "450"}, {Name: "loss", Value: "0.5321"}},
		Checkpoint: &kilnv1.Checkpoint{Step: 400, Path: "s3://ckpt/step-400"}, ProgressDeadlineSeconds: &deadline,
		StallTime: timestamppb.New(t0.Add(15 * time.Minute)),
	}}})
	stall := t0.Add(15 * time.Minute)
	want := &Progress{Percent: &pct, ETASeconds: &eta, Step: &step, TotalSteps: &total, UpdateTime: t0,
		Metrics:    []Metric{{Name: "step", Value: "450"}, {Name: "loss", Value: "0.5321"}},
		Checkpoint: &Checkpoint{Step: 400, Path: "s3://ckpt/step-400"}, ProgressDeadlineSeconds: &deadline, StallTime: &stall}
	if diff := cmp.Diff(want, j.Progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if v, ok := j.Progress.Metric("loss"); !ok || v != "0.5321" || j.Metrics["loss"] != "0.5321" || j.Metrics["step"] != "450" {
		t.Errorf("loss %q %v, metrics %v", v, ok, j.Metrics)
	}
	if _, ok := j.Progress.Metric("accuracy"); ok {
		t.Error("a metric not reported has a value")
	}
	if j := jobOf(&kilnv1.TrainJob{Name: "quiet", Status: &kilnv1.TrainJobStatus{}}); j.Progress != nil || j.Metrics != nil {
		t.Errorf("a job that never reported: progress %+v, metrics %v", j.Progress, j.Metrics)
	}
	if _, ok := (*Progress)(nil).Metric("loss"); ok {
		t.Error("no progress has a loss")
	}
}

// GetJobMetrics asks for the metrics named, in the client's namespace, retries while the
// server is unavailable, and returns the points by metric.
func TestGetJobMetrics(t *testing.T) {
	f := &fakeMetrics{fails: 1, history: &kilnv1.GetTrainJobMetricsResponse{Series: []*kilnv1.MetricSeries{loss(1, 2, 3)}, Reports: 3}}
	got, err := metricsClient(t, f).GetJobMetrics(t.Context(), "", "llm", "loss")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]MetricPoint{"loss": points(1, 2, 3)}, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if len(f.gets) != 2 || f.gets[1].GetNamespace() != "team-a" || f.gets[1].GetName() != "llm" || !cmp.Equal(f.gets[1].GetMetrics(), []string{"loss"}) {
		t.Errorf("requests %v: want two, the second for team-a/llm's loss", f.gets)
	}
	// A server older than the call answers Unimplemented.
	mux := http.NewServeMux()
	mux.Handle(kilnv1connect.NewTrainJobServiceHandler(kilnv1connect.UnimplementedTrainJobServiceHandler{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	old := &Client{Jobs: kilnv1connect.NewTrainJobServiceClient(srv.Client(), srv.URL), Namespace: "team-a"}
	if _, err := old.GetJobMetrics(t.Context(), "team-b", "llm"); !errors.Is(err, ErrUnimplemented) {
		t.Errorf("error %v, want Unimplemented from a server without the call", err)
	}
}

func TestWatchJobMetrics(t *testing.T) {
	unavailable := connect.NewError(connect.CodeUnavailable, errors.New("server restarting"))
	for name, tc := range map[string]struct {
		streams []metricsStream
		want    []map[string][]MetricPoint
		watches int
		wantErr func(error) bool
		stopAt  int // stop the loop after this many yields (0: never)
	}{
		"the history, then each report, until the job finishes": {
			streams: []metricsStream{{events: []*kilnv1.WatchTrainJobMetricsResponse{history(loss(1, 2)), newPoints(loss(3)), newPoints(loss(4)), finished}}},
			want:    []map[string][]MetricPoint{{"loss": points(1, 2)}, {"loss": points(3)}, {"loss": points(4)}},
			watches: 1,
		},
		"an empty history still comes first": {
			streams: []metricsStream{{events: []*kilnv1.WatchTrainJobMetricsResponse{history(), finished}}},
			want:    []map[string][]MetricPoint{{}},
			watches: 1,
		},
		"a dropped stream resumes, yielding only what is new": {
			streams: []metricsStream{
				{events: []*kilnv1.WatchTrainJobMetricsResponse{history(loss(1, 2)), newPoints(loss(3))}, err: unavailable},
				{}, // ends at once
				{events: []*kilnv1.WatchTrainJobMetricsResponse{history(loss(1, 2, 3)), history(loss(1, 3, 4)), finished}},
			},
			want:    []map[string][]MetricPoint{{"loss": points(1, 2)}, {"loss": points(3)}, {"loss": points(4)}},
			watches: 3,
		},
		"an error that retrying does not mend": {
			streams: []metricsStream{{err: connect.NewError(connect.CodePermissionDenied, errors.New("may not get trainjobmetrics"))}},
			watches: 1,
			wantErr: func(err error) bool {
				var e *Error
				return errors.Is(err, ErrPermissionDenied) && errors.As(err, &e) && e.Message == "may not get trainjobmetrics"
			},
		},
		"the caller stops": {
			streams: []metricsStream{{events: []*kilnv1.WatchTrainJobMetricsResponse{history(loss(1)), newPoints(loss(2)), finished}}},
			want:    []map[string][]MetricPoint{{"loss": points(1)}},
			watches: 1,
			stopAt:  1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeMetrics{streams: tc.streams}
			var got []map[string][]MetricPoint
			var gotErr error
			for points, err := range metricsClient(t, f).WatchJobMetrics(t.Context(), "", "llm", "loss") {
				if err != nil {
					gotErr = err
					break
				}
				got = append(got, points)
				if len(got) == tc.stopAt {
					break
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("points yielded (-want +got):\n%s", diff)
			}
			if (tc.wantErr == nil) != (gotErr == nil) || (tc.wantErr != nil && !tc.wantErr(gotErr)) {
				t.Errorf("error %v", gotErr)
			}
			if len(f.watches) != tc.watches || f.watches[0].GetNamespace() != "team-a" || !cmp.Equal(f.watches[0].GetMetrics(), []string{"loss"}) {
				t.Errorf("watches %v, want %d of team-a/llm's loss", f.watches, tc.watches)
			}
		})
	}
}

func TestWatchJobMetricsEndsWithTheContext(t *testing.T) {
	f := &fakeMetrics{streams: []metricsStream{{events: []*kilnv1.WatchTrainJobMetricsResponse{history(loss(1))}, err: connect.NewError(connect.CodeUnavailable, errors.New("down"))}}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var gotErr error
	for _, err := range metricsClient(t, f).WatchJobMetrics(ctx, "", "llm") {
		cancel()
		if err != nil {
			gotErr = err
		}
	}
	if !errors.Is(gotErr, context.Canceled) {
		t.Errorf("error %v, want the context's", gotErr)
	}
}
