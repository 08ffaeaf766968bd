package kilntest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// Schedule is a schedule of the fixture: Sundays at 02:00 in Berlin, with one active run.
func Schedule(namespace, name string) *kilnv1.CronTrainJob {
	return &kilnv1.CronTrainJob{
		Name: name, Namespace: namespace, Uid: "uid-" + name, CreateTime: timestamppb.New(Now.AddDate(0, 0, -30)),
		Spec: &kilnv1.CronTrainJobSpec{
			Schedule: "0 2 * * 0", TimeZone: "Europe/Berlin", ConcurrencyPolicy: kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID,
			SuccessfulJobsHistoryLimit: proto.Int32(3), FailedJobsHistoryLimit: proto.Int32(1),
			TrainJob: &kilnv1.TrainJobTemplate{Spec: &kilnv1.TrainJobSpec{
				Runtime: "torch-distributed", Image: "ghcr.io/acme/train:v3", Command: []string{"torchrun", "train.py"}, Nodes: 2, Queue: "default",
				ActiveDeadlineSeconds: proto.Int64(12 * 3600),
			}},
		},
		Status: &kilnv1.CronTrainJobStatus{
			Active:           []string{name + "-29397720"},
			LastScheduleTime: timestamppb.New(Now.Add(-35 * time.Hour)),
			// Sunday 2026-11-29 02:00 CET.
			NextScheduleTime: timestamppb.New(Now.Add(5*24*time.Hour + 13*time.Hour)),
		},
	}
}

// PutSchedule stores a schedule.
func (s *Server) PutSchedule(c *kilnv1.CronTrainJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Schedules[c.GetNamespace()+"/"+c.GetName()] = proto.CloneOf(c)
}

func (s *Server) schedule(ns, name string) (*kilnv1.CronTrainJob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.Schedules[ns+"/"+name]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("getting CronTrainJob %s/%s: crontrainjobs.kiln.dev %q not found", ns, name, name))
	}
	return c, nil
}

// CreateCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *Server) CreateCronTrainJob(_ context.Context, req *connect.Request[kilnv1.CreateCronTrainJobRequest]) (*connect.Response[kilnv1.CreateCronTrainJobResponse], error) {
	m := req.Msg
	s.mu.Lock()
	s.CreatedSchedules = append(s.CreatedSchedules, m)
	s.mu.Unlock()
	in := m.GetCronTrainJob()
	if in == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("manifests are not served by this test server"))
	}
	c := &kilnv1.CronTrainJob{Name: in.GetName(), Namespace: m.GetNamespace(), CreateTime: timestamppb.New(Now), Labels: in.GetLabels(), Spec: in.GetSpec(),
		Status: &kilnv1.CronTrainJobStatus{NextScheduleTime: timestamppb.New(Now.Add(5*24*time.Hour + 13*time.Hour))}}
	if !m.GetDryRun() {
		s.PutSchedule(c)
	}
	return connect.NewResponse(&kilnv1.CreateCronTrainJobResponse{CronTrainJob: c, Manifest: "apiVersion: kiln.dev/v1alpha1\nkind: CronTrainJob\nmetadata:\n  name: " + c.Name + "\n"}), nil
}

// GetCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *Server) GetCronTrainJob(_ context.Context, req *connect.Request[kilnv1.GetCronTrainJobRequest]) (*connect.Response[kilnv1.GetCronTrainJobResponse], error) {
	c, err := s.schedule(req.Msg.GetNamespace(), req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kilnv1.GetCronTrainJobResponse{CronTrainJob: c}), nil
}

// ListCronTrainJobs implements kilnv1connect.CronTrainJobServiceHandler.
func (s *Server) ListCronTrainJobs(_ context.Context, req *connect.Request[kilnv1.ListCronTrainJobsRequest]) (*connect.Response[kilnv1.ListCronTrainJobsResponse], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &kilnv1.ListCronTrainJobsResponse{}
	for _, c := range s.Schedules {
		if req.Msg.GetAllNamespaces() || c.GetNamespace() == req.Msg.GetNamespace() {
			res.CronTrainJobs = append(res.CronTrainJobs, c)
		}
	}
	sort.Slice(res.CronTrainJobs, func(i, j int) bool {
		a, b := res.CronTrainJobs[i], res.CronTrainJobs[j]
		return a.GetNamespace()+"/"+a.GetName() < b.GetNamespace()+"/"+b.GetName()
	})
	return connect.NewResponse(res), nil
}

func (s *Server) setScheduleSuspended(ns, name string, suspend bool) (*kilnv1.CronTrainJob, error) {
	c, err := s.schedule(ns, name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Spec.Suspend = suspend
	if suspend {
		c.Status.NextScheduleTime = nil
	}
	return c, nil
}

// SuspendCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *Server) SuspendCronTrainJob(_ context.Context, req *connect.Request[kilnv1.SuspendCronTrainJobRequest]) (*connect.Response[kilnv1.SuspendCronTrainJobResponse], error) {
	c, err := s.setScheduleSuspended(req.Msg.GetNamespace(), req.Msg.GetName(), true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kilnv1.SuspendCronTrainJobResponse{CronTrainJob: c}), nil
}

// ResumeCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *Server) ResumeCronTrainJob(_ context.Context, req *connect.Request[kilnv1.ResumeCronTrainJobRequest]) (*connect.Response[kilnv1.ResumeCronTrainJobResponse], error) {
	c, err := s.setScheduleSuspended(req.Msg.GetNamespace(), req.Msg.GetName(), false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kilnv1.ResumeCronTrainJobResponse{CronTrainJob: c}), nil
}

// TriggerCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler: the run is a
// job of the server.
func (s *Server) TriggerCronTrainJob(_ context.Context, req *connect.Request[kilnv1.TriggerCronTrainJobRequest]) (*connect.Response[kilnv1.TriggerCronTrainJobResponse], error) {
	c, err := s.schedule(req.Msg.GetNamespace(), req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.Triggered = append(s.Triggered, req.Msg)
	s.mu.Unlock()
	j := Job(c.GetNamespace(), c.GetName()+"-mbcdf", kilnv1.State_STATE_QUEUED)
	j.Labels = map[string]string{"kiln.dev/cron-train-job": c.GetName()}
	j.Annotations = map[string]string{"kiln.dev/scheduled-time": Now.Format("2006-01-02T15:04:05Z07:00"), "kiln.dev/triggered-by": "alice"}
	s.Put(j)
	return connect.NewResponse(&kilnv1.TriggerCronTrainJobResponse{TrainJob: j}), nil
}

// DeleteCronTrainJob implements kilnv1connect.CronTrainJobServiceHandler.
func (s *Server) DeleteCronTrainJob(_ context.Context, req *connect.Request[kilnv1.DeleteCronTrainJobRequest]) (*connect.Response[kilnv1.DeleteCronTrainJobResponse], error) {
	if _, err := s.schedule(req.Msg.GetNamespace(), req.Msg.GetName()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.Schedules, req.Msg.GetNamespace()+"/"+req.Msg.GetName())
	return connect.NewResponse(&kilnv1.DeleteCronTrainJobResponse{}), nil
}

// ListCronTrainJobRuns implements kilnv1connect.CronTrainJobServiceHandler: the jobs
// labelled with the schedule's name, newest first.
func (s *Server) ListCronTrainJobRuns(_ context.Context, req *connect.Request[kilnv1.ListCronTrainJobRunsRequest]) (*connect.Response[kilnv1.ListCronTrainJobRunsResponse], error) {
	if _, err := s.schedule(req.Msg.GetNamespace(), req.Msg.GetName()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &kilnv1.ListCronTrainJobRunsResponse{}
	for _, j := range s.jobs {
		if j.GetNamespace() == req.Msg.GetNamespace() && j.GetLabels()["kiln.dev/cron-train-job"] == req.Msg.GetName() {
			res.TrainJobs = append(res.TrainJobs, j)
		}
	}
	sort.Slice(res.TrainJobs, func(i, k int) bool {
		return strings.Compare(res.TrainJobs[i].GetName(), res.TrainJobs[k].GetName()) > 0
	})
	return connect.NewResponse(res), nil
}

// StartWithSchedules serves the schedules of the fixture: weekly-retrain (Sundays, with one
// run), nightly (suspended, never run) in namespace team, and one schedule elsewhere.
func StartWithSchedules(t *testing.T) *Server {
	s := Start(t)
	s.PutSchedule(Schedule("team", "weekly-retrain"))
	nightly := Schedule("team", "nightly")
	nightly.Spec.Schedule, nightly.Spec.TimeZone, nightly.Spec.Suspend, nightly.Status = "@daily", "", true, &kilnv1.CronTrainJobStatus{}
	s.PutSchedule(nightly)
	s.PutSchedule(Schedule("other", "elsewhere"))
	run := Job("team", "weekly-retrain-29397720", kilnv1.State_STATE_RUNNING)
	run.Labels = map[string]string{"kiln.dev/cron-train-job": "weekly-retrain"}
	run.Annotations = map[string]string{"kiln.dev/scheduled-time": "2026-11-22T01:00:00Z"}
	s.Put(run)
	return s
}
