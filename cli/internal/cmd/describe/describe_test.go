package describe

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func i64(v int64) *int64 { return &v }
func i32(v int32) *int32 { return &v }

func running() *kilnv1.TrainJob {
	now := kilntest.Now
	j := kilntest.Job("team", "mnist", kilnv1.State_STATE_RUNNING)
	j.Labels = map[string]string{"team": "nlp", "kueue.x-k8s.io/queue-name": "default"}
	j.Spec.ResourcesPerNode = &kilnv1.Resources{Limits: map[string]string{"nvidia.com/gpu": "8"}, Requests: map[string]string{"cpu": "16"}}
	j.Spec.Env = []*kilnv1.EnvVar{{Name: "LR", Value: "0.1"}}
	j.Status = &kilnv1.TrainJobStatus{
		State: kilnv1.State_STATE_RUNNING, Reason: "Running", Message: "1 of 1 jobs ready",
		StartTime: timestamppb.New(now.Add(-18 * time.Minute)), ActiveDeadlineSeconds: i64(3600), TtlSecondsAfterFinished: i32(86400),
		DeadlineTime: timestamppb.New(now.Add(42 * time.Minute)),
		Queue:        &kilnv1.QueuePosition{LocalQueue: "default", ClusterQueue: "cluster-queue", Admitted: true},
		Restarts: &kilnv1.Restarts{Count: 2, CountedTowardsMax: 1, MaxRestarts: 3, LastReason: "Disruption",
			LastMessage: "applying RestartJobSetAndIgnoreMaxRestarts failure policy action (first failed job: mnist-node-1)", LastRestartTime: timestamppb.New(now.Add(-3 * time.Minute))},
		Steps: []*kilnv1.Step{
			{Name: "node-0", Phase: "Running", Node: "kwok-gpu-0", Devices: []*kilnv1.Device{{Resource: "nvidia.com/gpu", Count: 8}}, StartTime: timestamppb.New(now.Add(-17 * time.Minute))},
			{Name: "node-1", Phase: "Running", Node: "kwok-gpu-1", Devices: []*kilnv1.Device{{Resource: "nvidia.com/gpu", Count: 8}}, Restarts: 1, StartTime: timestamppb.New(now.Add(-3 * time.Minute))},
		},
	}
	return j
}

func TestDescribe(t *testing.T) {
	now := kilntest.Now
	events := []*kilnv1.Event{
		{Type: "Normal", Reason: "Created", Object: "TrainJob/mnist", Message: "Created JobSet mnist", Count: 1, LastTime: timestamppb.New(now.Add(-18 * time.Minute))},
		{Type: "Warning", Reason: "BackOff", Object: "Pod/mnist-node-0-1-x7k2p", Message: "Back-off restarting failed container", Count: 3, LastTime: timestamppb.New(now.Add(-4 * time.Minute))},
	}
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-d)) }
	// The operator's lifecycle events of a queued job that restarted once on a disruption; a
	// pod's event is not part of the job's timeline.
	lifecycle := []*kilnv1.Event{
		{Type: "Normal", Reason: "Suspended", Object: "TrainJob/mnist", Count: 1, FirstTime: at(20 * time.Minute), LastTime: at(20 * time.Minute)},
		{Type: "Normal", Reason: "Created", Object: "TrainJob/mnist", Message: "Created JobSet mnist", Count: 1, LastTime: at(20 * time.Minute)},
		{Type: "Normal", Reason: "Resumed", Object: "TrainJob/mnist", Count: 1, FirstTime: at(18 * time.Minute), LastTime: at(18 * time.Minute)},
		{Type: "Normal", Reason: "Running", Object: "TrainJob/mnist", Count: 2, FirstTime: at(17 * time.Minute), LastTime: at(2*time.Minute + 50*time.Second)},
		{Type: "Warning", Reason: "Restarted", Object: "TrainJob/mnist", Count: 1, FirstTime: at(3 * time.Minute), LastTime: at(3 * time.Minute),
			Message: "restarting all pods (restart 2; not counted against maxRestarts, 1 of 3 used): Disruption: applying RestartJobSetAndIgnoreMaxRestarts failure policy action"},
		{Type: "Warning", Reason: "BackOff", Object: "Pod/mnist-node-0-1-x7k2p", Message: "Back-off restarting failed container", Count: 3, LastTime: at(4 * time.Minute)},
	}
	queued := kilntest.Job("team", "llama", kilnv1.State_STATE_QUEUED)
	queued.Status = &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_QUEUED, Reason: "Pending",
		Message:                 "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu, 8 more needed",
		Queue:                   &kilnv1.QueuePosition{LocalQueue: "default", ClusterQueue: "cluster-queue", PositionInLocalQueue: 3, PositionInClusterQueue: 5},
		TtlSecondsAfterFinished: i32(3600)}
	failed := kilntest.Job("team", "short", kilnv1.State_STATE_FAILED)
	failed.CreateTime = at(3 * time.Hour)
	failed.Status = &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_FAILED, Reason: "DeadlineExceeded", Message: "TrainJob exceeded its active deadline",
		StartTime: timestamppb.New(now.Add(-2 * time.Hour)), CompletionTime: timestamppb.New(now.Add(-time.Hour)),
		ActiveDeadlineSeconds: i64(3600), TtlSecondsAfterFinished: i32(86400), TtlDeleteTime: timestamppb.New(now.Add(23 * time.Hour))}
	for name, tc := range map[string]struct {
		job       *kilnv1.TrainJob
		events    []*kilnv1.Event
		eventsErr error
		tty       bool
	}{
		"running-tty":  {job: running(), events: events, tty: true},
		"running-pipe": {job: running(), events: events},
		"queued":       {job: queued},
		"failed-ttl":   {job: failed, eventsErr: errors.New("events are not readable")},
		"timeline":     {job: running(), events: lifecycle},
	} {
		t.Run(name, func(t *testing.T) {
			io, _, _, _ := iostreams.Test()
			io.SetTTY(tc.tty)
			kilntest.Golden(t, "describe-"+name, Describe(io, now, tc.job, tc.events, tc.eventsErr))
		})
	}
}

func TestDescribeCommand(t *testing.T) {
	s := kilntest.Start(t)
	s.Put(running())
	f, io := s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f, Name: "mnist"}); err != nil {
		t.Fatal(err)
	}
	if out := io.Out.(interface{ String() string }).String(); len(out) == 0 {
		t.Errorf("no output")
	}
}
