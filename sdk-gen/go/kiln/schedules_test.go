package kiln

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
)

// fakeSchedules records the requests it gets and answers as the API server would.
type fakeSchedules struct {
	kilnv1connect.UnimplementedCronTrainJobServiceHandler
	created   []*kilnv1.CreateCronTrainJobRequest
	triggered []*kilnv1.TriggerCronTrainJobRequest
	failOnce  bool
}

func (f *fakeSchedules) CreateCronTrainJob(_ context.Context, req *connect.Request[kilnv1.CreateCronTrainJobRequest]) (*connect.Response[kilnv1.CreateCronTrainJobResponse], error) {
	f.created = append(f.created, req.Msg)
	if f.failOnce {
		f.failOnce = false
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("restarting"))
	}
	in := req.Msg.GetCronTrainJob()
	return connect.NewResponse(&kilnv1.CreateCronTrainJobResponse{CronTrainJob: &kilnv1.CronTrainJob{
		Name: in.GetName(), Namespace: req.Msg.GetNamespace(), Spec: in.GetSpec(),
		Status: &kilnv1.CronTrainJobStatus{NextScheduleTime: timestamppb.New(time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)), Active: []string{"weekly-29407680"}},
	}}), nil
}

func (f *fakeSchedules) TriggerCronTrainJob(_ context.Context, req *connect.Request[kilnv1.TriggerCronTrainJobRequest]) (*connect.Response[kilnv1.TriggerCronTrainJobResponse], error) {
	f.triggered = append(f.triggered, req.Msg)
	return connect.NewResponse(&kilnv1.TriggerCronTrainJobResponse{TrainJob: &kilnv1.TrainJob{Name: req.Msg.GetName() + "-mbcdfg"}}), nil
}

func fakeClient(t *testing.T, h kilnv1connect.CronTrainJobServiceHandler) *Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(kilnv1connect.NewCronTrainJobServiceHandler(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(Options{Server: srv.URL, Namespace: "team-a", ConfigFile: t.TempDir() + "/none.yaml", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCreateScheduleSendsTheScheduleAndRetriesWithOneRequestID(t *testing.T) {
	f := &fakeSchedules{failOnce: true}
	c := fakeClient(t, f)
	s, err := c.CreateSchedule(context.Background(), ScheduleOptions{
		Name: "weekly", Schedule: "0 2 * * 0", TimeZone: "Europe/Berlin", ConcurrencyPolicy: "forbid",
		SuccessfulJobsHistoryLimit: ptr(int32(2)), FailedJobsHistoryLimit: ptr(int32(1)),
		Run: TrainOptions{Runtime: "torch-distributed", Trainer: &CustomTrainerContainer{Command: []string{"torchrun", "train.py"}, NumNodes: 2},
			Queue: "gpu", ActiveDeadlineSeconds: ptr(int64(43200)), Labels: map[string]string{"stage": "retrain"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.created) != 2 || f.created[0].GetRequestId() == "" || f.created[0].GetRequestId() != f.created[1].GetRequestId() {
		t.Fatalf("want one retry with the same request id, got %d requests", len(f.created))
	}
	want := &kilnv1.NewCronTrainJob{Name: "weekly", Spec: &kilnv1.CronTrainJobSpec{
		Schedule: "0 2 * * 0", TimeZone: "Europe/Berlin", ConcurrencyPolicy: kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID,
		SuccessfulJobsHistoryLimit: ptr(int32(2)), FailedJobsHistoryLimit: ptr(int32(1)),
		TrainJob: &kilnv1.TrainJobTemplate{Labels: map[string]string{"stage": "retrain"}, Spec: &kilnv1.TrainJobSpec{
			Runtime: "torch-distributed", Command: []string{"torchrun", "train.py"}, Nodes: 2, Queue: "gpu", ActiveDeadlineSeconds: ptr(int64(43200)),
		}},
	}}
	if got := f.created[1].GetCronTrainJob(); !proto.Equal(got, want) || f.created[1].GetNamespace() != "team-a" {
		t.Errorf("sent %v in %q, want %v in team-a", got, f.created[1].GetNamespace(), want)
	}
	if s.ConcurrencyPolicy != Forbid || s.NextScheduleTime == nil || !s.NextScheduleTime.Equal(time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)) ||
		s.Queue != "gpu" || *s.ActiveDeadlineSeconds != 43200 || len(s.Active) != 1 {
		t.Errorf("decoded %+v", s)
	}
}

func TestCreateScheduleRefusesAnUnknownPolicyBeforeCalling(t *testing.T) {
	f := &fakeSchedules{}
	c := fakeClient(t, f)
	_, err := c.CreateSchedule(context.Background(), ScheduleOptions{Name: "x", Schedule: "@daily", ConcurrencyPolicy: "Sometimes", Run: TrainOptions{Runtime: "torch-distributed"}})
	if err == nil || len(f.created) != 0 {
		t.Fatalf("err %v after %d requests: want an error naming ConcurrencyPolicy and no request", err, len(f.created))
	}
	if _, err := c.CreateSchedule(context.Background(), ScheduleOptions{Name: "x", Schedule: "@daily"}); err == nil || len(f.created) != 0 {
		t.Fatalf("a schedule without a runtime: err %v", err)
	}
}

func TestTriggerScheduleReturnsTheRun(t *testing.T) {
	f := &fakeSchedules{}
	name, err := fakeClient(t, f).TriggerSchedule(context.Background(), "", "weekly")
	if err != nil || name != "weekly-mbcdfg" {
		t.Fatalf("TriggerSchedule = %q, %v", name, err)
	}
	if f.triggered[0].GetRequestId() == "" || f.triggered[0].GetNamespace() != "team-a" {
		t.Errorf("sent %v: want a request id and the client's namespace", f.triggered[0])
	}
}

func ptr[T any](v T) *T { return &v }
