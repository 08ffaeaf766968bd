// Package kilntest serves Kiln's API in-process from memory, for the CLI's unit tests: the
// calls cross a real Connect connection, the jobs are whatever a test puts there.
package kilntest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/sdk-gen/go/kiln"
)

// Now is the fixed time of every test.
var Now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// Server is an in-memory Kiln API.
type Server struct {
	kilnv1connect.UnimplementedTrainJobServiceHandler
	kilnv1connect.UnimplementedRuntimeServiceHandler
	kilnv1connect.UnimplementedQueueServiceHandler
	kilnv1connect.UnimplementedServerServiceHandler
	kilnv1connect.UnimplementedCronTrainJobServiceHandler

	mu       sync.Mutex
	jobs     map[string]*kilnv1.TrainJob
	rv       int
	watchers []chan *kilnv1.WatchTrainJobsResponse
	// watchStarted is closed, and replaced, when a watch starts.
	watchStarted chan struct{}
	// Logs are the lines StreamLogs sends, by step; KeptLogs those of earlier attempts, by
	// attempt and step (previous: the highest attempt).
	Logs     map[string][]string
	KeptLogs map[int32]map[string][]string
	// Events ListEvents returns.
	Events []*kilnv1.Event
	// Metrics are the metric histories GetTrainJobMetrics returns, by job name (none: an
	// empty history); MetricsCalls counts its calls.
	Metrics      map[string]*kilnv1.GetTrainJobMetricsResponse
	MetricsCalls int
	Runtimes     []*kilnv1.Runtime
	Queues       []*kilnv1.Queue
	// Created records the create requests.
	Created []*kilnv1.CreateTrainJobRequest
	// Schedules are the CronTrainJobs, by namespace/name; CreatedSchedules and Triggered
	// record those requests.
	Schedules        map[string]*kilnv1.CronTrainJob
	CreatedSchedules []*kilnv1.CreateCronTrainJobRequest
	Triggered        []*kilnv1.TriggerCronTrainJobRequest
	// Converted records the convert requests; ConvertAnswer is the answer to each.
	Converted     []*kilnv1.ConvertManifestsRequest
	ConvertAnswer *kilnv1.ConvertManifestsResponse
	URL           string
}

// Start serves a new Server for the test's lifetime.
func Start(t *testing.T) *Server {
	t.Helper()
	s := &Server{jobs: map[string]*kilnv1.TrainJob{}, Logs: map[string][]string{}, watchStarted: make(chan struct{}), Schedules: map[string]*kilnv1.CronTrainJob{}}
	mux := http.NewServeMux()
	mux.Handle(kilnv1connect.NewTrainJobServiceHandler(s))
	mux.Handle(kilnv1connect.NewRuntimeServiceHandler(s))
	mux.Handle(kilnv1connect.NewQueueServiceHandler(s))
	mux.Handle(kilnv1connect.NewServerServiceHandler(s))
	mux.Handle(kilnv1connect.NewCronTrainJobServiceHandler(s))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Factory returns a factory whose commands call this server as namespace "team", with
// test streams (tty: a terminal) and a fake clock at Now, which only the test moves.
func (s *Server) Factory(tty bool) (*factory.Factory, *iostreams.IOStreams) {
	io, _, _, _ := iostreams.Test()
	io.SetTTY(tty)
	f := &factory.Factory{IO: io, Clock: clocktesting.NewFakeClock(Now), ConfigPath: "/nonexistent/kiln.yaml"}
	f.Client = func() (*kiln.Client, error) {
		// The CLI's own options, calling this server over plain HTTP/1.1.
		opts := f.Options()
		opts.Server, opts.HTTPClient, opts.Namespace = s.URL, http.DefaultClient, cmp.Or(f.Namespace, "team")
		return kiln.New(opts)
	}
	return f, io
}

// WaitForWatches blocks until n watches have started since the server did, or ctx ends. A
// job Put (or deleted) after that reaches those watches as a change: a test changes a job
// while a command watches it, rather than before the command got there.
func (s *Server) WaitForWatches(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		started, next := len(s.watchers), s.watchStarted
		s.mu.Unlock()
		if started >= n {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Put stores a job (as if it changed) and tells the watchers.
func (s *Server) Put(j *kilnv1.TrainJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	j = proto.CloneOf(j)
	j.ResourceVersion = fmt.Sprint(s.rv)
	key := j.GetNamespace() + "/" + j.GetName()
	typ := kilnv1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED
	if _, ok := s.jobs[key]; !ok {
		typ = kilnv1.WatchEventType_WATCH_EVENT_TYPE_ADDED
	}
	s.jobs[key] = j
	s.broadcast(&kilnv1.WatchTrainJobsResponse{Type: typ, TrainJob: j, ResourceVersion: j.ResourceVersion})
}

// Job returns a stored job, or nil.
func (s *Server) Job(namespace, name string) *kilnv1.TrainJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[namespace+"/"+name]
}

func (s *Server) broadcast(ev *kilnv1.WatchTrainJobsResponse) {
	for _, w := range s.watchers {
		select {
		case w <- ev:
		default:
		}
	}
}

// Job is a running job of the fixture.
func Job(namespace, name string, state kilnv1.State) *kilnv1.TrainJob {
	return &kilnv1.TrainJob{
		Name: name, Namespace: namespace, Uid: "uid-" + name, CreateTime: timestamppb.New(Now.Add(-90 * time.Minute)),
		Spec:   &kilnv1.TrainJobSpec{Runtime: "torch-distributed", Image: "ghcr.io/acme/train:v3", Command: []string{"torchrun", "train.py"}, Nodes: 2, Queue: "default"},
		Status: &kilnv1.TrainJobStatus{State: state},
	}
}

// Reporting is j with the progress its trainer reported 12 s before Now: percent, the
// seconds it estimates are left, and its loss.
func Reporting(j *kilnv1.TrainJob, percent, eta int32, loss string) *kilnv1.TrainJob {
	j.Status.Progress = &kilnv1.Progress{Percent: &percent, EtaSeconds: &eta, UpdateTime: timestamppb.New(Now.Add(-12 * time.Second)),
		Metrics: []*kilnv1.Metric{{Name: "loss", Value: loss}}}
	return j
}

func notFound(ns, name string) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("getting TrainJob %s/%s: trainjobs.trainer.kubeflow.org %q not found", ns, name, name))
}

// CreateTrainJob implements kilnv1connect.TrainJobServiceHandler.
func (s *Server) CreateTrainJob(_ context.Context, req *connect.Request[kilnv1.CreateTrainJobRequest]) (*connect.Response[kilnv1.CreateTrainJobResponse], error) {
	m := req.Msg
	s.mu.Lock()
	s.Created = append(s.Created, m)
	s.mu.Unlock()
	j := &kilnv1.TrainJob{Namespace: m.GetNamespace(), CreateTime: timestamppb.New(Now), Status: &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_RUNNING}}
	switch src := m.GetSource().(type) {
	case *kilnv1.CreateTrainJobRequest_TrainJob:
		j.Name, j.Labels, j.Spec = src.TrainJob.GetName(), src.TrainJob.GetLabels(), src.TrainJob.GetSpec()
		if j.Name == "" {
			j.Name = src.TrainJob.GetGenerateName() + "x7k2p"
		}
	case *kilnv1.CreateTrainJobRequest_Manifest:
		var obj struct {
			Metadata struct{ Name, Namespace string } `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(src.Manifest), &obj); err != nil || obj.Metadata.Name == "" {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("manifest: not a valid TrainJob"))
		}
		j.Name = obj.Metadata.Name
		if j.Namespace == "" {
			j.Namespace = obj.Metadata.Namespace
		}
		j.Spec = &kilnv1.TrainJobSpec{Runtime: "from-manifest"}
	}
	if j.Namespace == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("namespace: Required value"))
	}
	res := &kilnv1.CreateTrainJobResponse{TrainJob: j, Manifest: "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " + j.Name + "\n"}
	if !m.GetDryRun() {
		s.Put(j)
	}
	return connect.NewResponse(res), nil
}

// GetTrainJob implements kilnv1connect.TrainJobServiceHandler.
func (s *Server) GetTrainJob(_ context.Context, req *connect.Request[kilnv1.GetTrainJobRequest]) (*connect.Response[kilnv1.GetTrainJobResponse], error) {
	j := s.Job(req.Msg.GetNamespace(), req.Msg.GetName())
	if j == nil {
		return nil, notFound(req.Msg.GetNamespace(), req.Msg.GetName())
	}
	res := &kilnv1.GetTrainJobResponse{TrainJob: j}
	if req.Msg.GetIncludeManifest() {
		res.Manifest = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " + j.GetName() + "\n"
	}
	return connect.NewResponse(res), nil
}

// ListTrainJobs implements kilnv1connect.TrainJobServiceHandler (pages of 2 jobs, so the
// CLI's paging is exercised).
func (s *Server) ListTrainJobs(_ context.Context, req *connect.Request[kilnv1.ListTrainJobsRequest]) (*connect.Response[kilnv1.ListTrainJobsResponse], error) {
	m := req.Msg
	s.mu.Lock()
	var all []*kilnv1.TrainJob
	for _, j := range s.jobs {
		if (m.GetAllNamespaces() || j.GetNamespace() == m.GetNamespace()) && (len(m.GetStates()) == 0 || slices.Contains(m.GetStates(), j.GetStatus().GetState())) {
			all = append(all, j)
		}
	}
	s.mu.Unlock()
	sort.Slice(all, func(a, b int) bool {
		return all[a].GetNamespace()+"/"+all[a].GetName() < all[b].GetNamespace()+"/"+all[b].GetName()
	})
	res := &kilnv1.ListTrainJobsResponse{}
	for _, j := range all {
		if key := j.GetNamespace() + "/" + j.GetName(); m.GetPageToken() != "" && key <= m.GetPageToken() {
			continue
		}
		if len(res.TrainJobs) == 2 {
			last := res.TrainJobs[1]
			res.NextPageToken = last.GetNamespace() + "/" + last.GetName()
			break
		}
		res.TrainJobs = append(res.TrainJobs, j)
	}
	return connect.NewResponse(res), nil
}

// WatchTrainJobs implements kilnv1connect.TrainJobServiceHandler: the current state, then
// every Put, until the client goes.
func (s *Server) WatchTrainJobs(ctx context.Context, req *connect.Request[kilnv1.WatchTrainJobsRequest], stream *connect.ServerStream[kilnv1.WatchTrainJobsResponse]) error {
	m := req.Msg
	match := func(j *kilnv1.TrainJob) bool {
		return j.GetNamespace() == m.GetNamespace() && (m.GetName() == "" || j.GetName() == m.GetName())
	}
	ch := make(chan *kilnv1.WatchTrainJobsResponse, 100)
	s.mu.Lock()
	s.watchers = append(s.watchers, ch)
	close(s.watchStarted)
	s.watchStarted = make(chan struct{})
	var current []*kilnv1.TrainJob
	for _, j := range s.jobs {
		if match(j) {
			current = append(current, j)
		}
	}
	s.mu.Unlock()
	for _, j := range current {
		if err := stream.Send(&kilnv1.WatchTrainJobsResponse{Type: kilnv1.WatchEventType_WATCH_EVENT_TYPE_ADDED, TrainJob: j}); err != nil {
			return err
		}
	}
	if err := stream.Send(&kilnv1.WatchTrainJobsResponse{Type: kilnv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-ch:
			if ev.GetTrainJob() != nil && !match(ev.GetTrainJob()) {
				continue
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

func (s *Server) setState(ns, name string, st kilnv1.State) (*kilnv1.TrainJob, error) {
	j := s.Job(ns, name)
	if j == nil {
		return nil, notFound(ns, name)
	}
	j = proto.CloneOf(j)
	j.Status.State = st
	s.Put(j)
	return j, nil
}

// SuspendTrainJob implements kilnv1connect.TrainJobServiceHandler.
func (s *Server) SuspendTrainJob(_ context.Context, req *connect.Request[kilnv1.SuspendTrainJobRequest]) (*connect.Response[kilnv1.SuspendTrainJobResponse], error) {
	j, err := s.setState(req.Msg.GetNamespace(), req.Msg.GetName(), kilnv1.State_STATE_SUSPENDED)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kilnv1.SuspendTrainJobResponse{TrainJob: j}), nil
}

// ResumeTrainJob implements kilnv1connect.TrainJobServiceHandler.
func (s *Server) ResumeTrainJob(_ context.Context, req *connect.Request[kilnv1.ResumeTrainJobRequest]) (*connect.Response[kilnv1.ResumeTrainJobResponse], error) {
	j, err := s.setState(req.Msg.GetNamespace(), req.Msg.GetName(), kilnv1.State_STATE_RUNNING)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kilnv1.ResumeTrainJobResponse{TrainJob: j}), nil
}

// DeleteTrainJob implements kilnv1connect.TrainJobServiceHandler.
func (s *Server) DeleteTrainJob(_ context.Context, req *connect.Request[kilnv1.DeleteTrainJobRequest]) (*connect.Response[kilnv1.DeleteTrainJobResponse], error) {
	key := req.Msg.GetNamespace() + "/" + req.Msg.GetName()
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[key]
	if !ok {
		return nil, notFound(req.Msg.GetNamespace(), req.Msg.GetName())
	}
	delete(s.jobs, key)
	s.broadcast(&kilnv1.WatchTrainJobsResponse{Type: kilnv1.WatchEventType_WATCH_EVENT_TYPE_DELETED, TrainJob: j})
	return connect.NewResponse(&kilnv1.DeleteTrainJobResponse{}), nil
}

// StreamLogs implements kilnv1connect.TrainJobServiceHandler: Logs, by step in name order.
func (s *Server) StreamLogs(_ context.Context, req *connect.Request[kilnv1.StreamLogsRequest], stream *connect.ServerStream[kilnv1.StreamLogsResponse]) error {
	if s.Job(req.Msg.GetNamespace(), req.Msg.GetName()) == nil {
		return notFound(req.Msg.GetNamespace(), req.Msg.GetName())
	}
	logs, attempt := s.Logs, int32(0)
	if req.Msg.Attempt != nil || req.Msg.GetPrevious() {
		attempt = req.Msg.GetAttempt()
		if req.Msg.GetPrevious() {
			attempt = -1
			for a := range s.KeptLogs {
				attempt = max(attempt, a)
			}
		}
		kept, ok := s.KeptLogs[attempt]
		if !ok {
			return connect.NewError(connect.CodeNotFound, fmt.Errorf("no log of attempt %d was kept", attempt))
		}
		logs = kept
	}
	steps := make([]string, 0, len(logs))
	for step := range logs {
		steps = append(steps, step)
	}
	sort.Strings(steps)
	for _, step := range steps {
		if req.Msg.GetStep() != "" && step != req.Msg.GetStep() {
			continue
		}
		lines := logs[step]
		if n := req.Msg.TailLines; n != nil && int(*n) < len(lines) {
			lines = lines[len(lines)-int(*n):]
		}
		res := &kilnv1.StreamLogsResponse{}
		for _, l := range lines {
			res.Lines = append(res.Lines, &kilnv1.LogLine{Step: step, Pod: "p-" + step, Text: l, Attempt: attempt})
		}
		if err := stream.Send(res); err != nil {
			return err
		}
	}
	return nil
}

// ListEvents implements kilnv1connect.TrainJobServiceHandler.
func (s *Server) ListEvents(_ context.Context, req *connect.Request[kilnv1.ListEventsRequest]) (*connect.Response[kilnv1.ListEventsResponse], error) {
	return connect.NewResponse(&kilnv1.ListEventsResponse{Events: s.Events}), nil
}

// GetTrainJobMetrics implements kilnv1connect.TrainJobServiceHandler.
func (s *Server) GetTrainJobMetrics(_ context.Context, req *connect.Request[kilnv1.GetTrainJobMetricsRequest]) (*connect.Response[kilnv1.GetTrainJobMetricsResponse], error) {
	if s.Job(req.Msg.GetNamespace(), req.Msg.GetName()) == nil {
		return nil, notFound(req.Msg.GetNamespace(), req.Msg.GetName())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.MetricsCalls++
	if m := s.Metrics[req.Msg.GetName()]; m != nil {
		return connect.NewResponse(m), nil
	}
	return connect.NewResponse(&kilnv1.GetTrainJobMetricsResponse{}), nil
}

// ListRuntimes implements kilnv1connect.RuntimeServiceHandler.
func (s *Server) ListRuntimes(context.Context, *connect.Request[kilnv1.ListRuntimesRequest]) (*connect.Response[kilnv1.ListRuntimesResponse], error) {
	return connect.NewResponse(&kilnv1.ListRuntimesResponse{Runtimes: s.Runtimes}), nil
}

// GetRuntime implements kilnv1connect.RuntimeServiceHandler.
func (s *Server) GetRuntime(_ context.Context, req *connect.Request[kilnv1.GetRuntimeRequest]) (*connect.Response[kilnv1.GetRuntimeResponse], error) {
	for _, rt := range s.Runtimes {
		if rt.GetName() == req.Msg.GetName() {
			return connect.NewResponse(&kilnv1.GetRuntimeResponse{Runtime: rt}), nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("getting ClusterTrainingRuntime %s: not found", req.Msg.GetName()))
}

// ListQueues implements kilnv1connect.QueueServiceHandler.
func (s *Server) ListQueues(context.Context, *connect.Request[kilnv1.ListQueuesRequest]) (*connect.Response[kilnv1.ListQueuesResponse], error) {
	return connect.NewResponse(&kilnv1.ListQueuesResponse{Queues: s.Queues}), nil
}

// GetServerInfo implements kilnv1connect.ServerServiceHandler.
func (s *Server) GetServerInfo(context.Context, *connect.Request[kilnv1.GetServerInfoRequest]) (*connect.Response[kilnv1.GetServerInfoResponse], error) {
	return connect.NewResponse(&kilnv1.GetServerInfoResponse{Version: "v0.9.0", KubernetesVersion: "v1.36.3", Kueue: true, User: "system:serviceaccount:team:alice"}), nil
}

// ConvertManifests answers as the API server does for one PyTorchJob: the request is kept
// in Converted, and the answer is ConvertAnswer.
func (s *Server) ConvertManifests(_ context.Context, req *connect.Request[kilnv1.ConvertManifestsRequest]) (*connect.Response[kilnv1.ConvertManifestsResponse], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Converted = append(s.Converted, req.Msg)
	if s.ConvertAnswer == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("manifests: document 1: not a kind kiln convert takes"))
	}
	return connect.NewResponse(s.ConvertAnswer), nil
}
