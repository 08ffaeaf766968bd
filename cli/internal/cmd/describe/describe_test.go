package describe

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
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
	// The lifecycle events of a queued job (Kueue's for its queueing, admission and
	// eviction, the operator's for the rest) that was preempted once and restarted once on
	// a disruption; a pod's event is not part of the job's timeline.
	lifecycle := []*kilnv1.Event{
		{Type: "Normal", Reason: "CreatedWorkload", Object: "TrainJob/mnist", Message: "Created Workload: team/trainjob-mnist-3f2a1", Count: 1, FirstTime: at(25 * time.Minute), LastTime: at(25 * time.Minute)},
		{Type: "Normal", Reason: "Created", Object: "TrainJob/mnist", Message: "Created JobSet mnist", Count: 1, LastTime: at(25 * time.Minute)},
		{Type: "Normal", Reason: "Stopped", Object: "TrainJob/mnist", Count: 1, FirstTime: at(22 * time.Minute), LastTime: at(22 * time.Minute),
			Message: "Preempted to accommodate a workload (UID: 5c1e, JobUID: 9a0b) due to prioritization in the ClusterQueue; preemptor path: /cluster-queue"},
		{Type: "Normal", Reason: "Started", Object: "TrainJob/mnist", Message: "Admitted by clusterQueue cluster-queue", Count: 2, FirstTime: at(24 * time.Minute), LastTime: at(18 * time.Minute)},
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
	// A job whose LocalQueue does not exist: no place in any queue, and says so.
	ghost := kilntest.Job("team", "ghost", kilnv1.State_STATE_QUEUED)
	ghost.Status = &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_QUEUED, Reason: "Pending", Message: "LocalQueue gpu-queue doesn't exist",
		Queue: &kilnv1.QueuePosition{LocalQueue: "gpu-queue", LocalQueueMissing: true}}
	// A job restarted twice, whose new pods wait for a claim: Starting, the claim named, its
	// earlier attempts' logs kept.
	waiting := running()
	waiting.Status.Reason, waiting.Status.Message = "WaitingForVolume", "waiting for PersistentVolumeClaim kiln-checkpoints, which does not exist in namespace team: create it (pod mnist-node-0-0-x7k2p cannot be scheduled)"
	waiting.Status.KeptLogAttempts = []int32{0, 1}
	// A job placed in one rack by Kueue's topology-aware scheduling, and one of 5 nodes that
	// no rack has room for.
	placed := running()
	placed.Spec.Topology = &kilnv1.TopologyRequest{Level: "rack", NodeLabel: "cloud.google.com/gce-topology-subblock"}
	placed.Status.Placement = &kilnv1.Placement{Topology: "default",
		Levels: []*kilnv1.TopologyLevel{{Name: "block", NodeLabel: "cloud.google.com/gce-topology-block"}, {Name: "rack", NodeLabel: "cloud.google.com/gce-topology-subblock"}, {Name: "host", NodeLabel: "kubernetes.io/hostname"}},
		PodSets: []*kilnv1.PodSetPlacement{{Name: "node", Count: 2, Flavor: "gpu-tas", RequiredLevel: "rack", Domains: []*kilnv1.TopologyDomain{
			{Values: []string{"b0", "b0-r1", "kwok-tas-b0-r1-0"}, Pods: 1}, {Values: []string{"b0", "b0-r1", "kwok-tas-b0-r1-2"}, Pods: 1}}}}}
	placed.Status.Steps[0].Node, placed.Status.Steps[1].Node = "kwok-tas-b0-r1-0", "kwok-tas-b0-r1-2"
	spread := running()
	spread.Spec.Topology = &kilnv1.TopologyRequest{Level: "rack", NodeLabel: "cloud.google.com/gce-topology-subblock", Preferred: true}
	spread.Status.Placement = &kilnv1.Placement{Topology: "default", Levels: placed.Status.Placement.Levels,
		PodSets: []*kilnv1.PodSetPlacement{{Name: "node", Count: 3, Flavor: "gpu-tas", PreferredLevel: "rack", Domains: []*kilnv1.TopologyDomain{
			{Values: []string{"b0", "b0-r1", "kwok-tas-b0-r1-0"}, Pods: 1}, {Values: []string{"", "", "gone"}, Pods: 1}, {Values: []string{"b1", "b1-r0", "kwok-tas-b1-r0-3"}, Pods: 1}}}}}
	noRack := kilntest.Job("team", "wide", kilnv1.State_STATE_QUEUED)
	noRack.Spec.Topology = placed.Spec.Topology
	noRack.Status = &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_QUEUED, Reason: "Pending",
		Message: `no rack has room for all 5 pods of node (it requires one rack, node label cloud.google.com/gce-topology-subblock); Kueue: couldn't assign flavors to pod set node: topology "default" allows to fit only 4 out of 5 pod(s)`,
		Queue:   &kilnv1.QueuePosition{LocalQueue: "tas", ClusterQueue: "tas-queue", PositionInLocalQueue: 1, PositionInClusterQueue: 1}}
	for name, tc := range map[string]struct {
		job  *kilnv1.TrainJob
		more Related
		tty  bool
	}{
		"placed-in-a-rack":     {job: placed},
		"placed-preferred":     {job: spread},
		"waiting-for-a-rack":   {job: noRack},
		"ghost-queue":          {job: ghost},
		"waiting-for-a-volume": {job: waiting},
		"running-tty":          {job: running(), more: Related{Events: events}, tty: true},
		"running-pipe":         {job: running(), more: Related{Events: events}},
		"queued":               {job: queued},
		"failed-ttl":           {job: failed, more: Related{EventsErr: errors.New("events are not readable")}},
		"timeline":             {job: running(), more: Related{Events: lifecycle}},
		// A trainer that reports: its bar, steps, ETA, deadline, metrics, checkpoint and the
		// curve of its loss, resampled from 120 points to 60 columns.
		"progress-tty": {job: reporting(), more: Related{Events: events, Metrics: lossCurve(120)}, tty: true},
		"progress":     {job: reporting(), more: Related{Metrics: lossCurve(120)}},
		// Restarted once for its silence (no failure policy: Kiln's restart only), it counts
		// steps without knowing how many; the caller may not read the metric history.
		"progress-stalled": {job: stalled(), more: Related{MetricsErr: connect.NewError(connect.CodePermissionDenied,
			errors.New(`trainjobmetrics.kiln.dev "mnist" is forbidden: User "alice" cannot get resource "trainjobmetrics" in API group "kiln.dev" in the namespace "team"`))}},
		// Silent again after that restart: failed; a server that keeps no history.
		"progress-deadline-exceeded": {job: deadlineExceeded(), more: Related{Events: stallEvents(),
			MetricsErr: connect.NewError(connect.CodeUnimplemented, errors.New("kiln.v1.TrainJobService.GetTrainJobMetrics is not implemented"))}},
	} {
		t.Run(name, func(t *testing.T) {
			io, _, _, _ := iostreams.Test()
			io.SetTTY(tc.tty)
			kilntest.Golden(t, "describe-"+name, Describe(io, now, tc.job, tc.more))
		})
	}
}

// What a trainer reports reaches the terminal as text: escape sequences (a window title, a
// cleared screen) and line breaks (a forged line) in metric names and values, a reason or a
// message are shown escaped, on a terminal and in a pipe.
func TestDescribeShowsNoEscapeFromTheJob(t *testing.T) {
	j := reporting()
	j.Status.Progress.Metrics = append(j.Status.Progress.Metrics,
		&kilnv1.Metric{Name: "\x1b]0;pwned\x07loss", Value: "1\x1b[2J\nState:          Complete"})
	j.Status.Message = "ok\x1b[1A\rRestarts: 0"
	for _, tty := range []bool{false, true} {
		io, _, _, _ := iostreams.Test()
		io.SetTTY(tty)
		out := Describe(io, kilntest.Now, j, Related{})
		for _, bad := range []string{"\x1b]", "\x1b[2J", "\x1b[1A", "\x07", "\nState:          Complete", "\rRestarts"} {
			if strings.Contains(out, bad) {
				t.Errorf("tty %v: the output holds %q:\n%s", tty, bad, out)
			}
		}
		if !strings.Contains(out, `\x1b]0;pwned\x07loss`) || !strings.Contains(out, `1\x1b[2J\nState:`) {
			t.Errorf("tty %v: the reported metric is not shown escaped:\n%s", tty, out)
		}
	}
}

// reporting is a running job whose trainer reports its progress, with a progress deadline
// of 15 minutes.
func reporting() *kilnv1.TrainJob {
	now := kilntest.Now
	j := running()
	j.Status.Progress = &kilnv1.Progress{
		Percent: i32(45), EtaSeconds: i32(190), Step: i64(450), TotalSteps: i64(1000),
		UpdateTime: timestamppb.New(now.Add(-12 * time.Second)),
		Metrics: []*kilnv1.Metric{{Name: "step", Value: "450"}, {Name: "total_steps", Value: "1000"}, {Name: "loss", Value: "0.5321098741"},
			{Name: "learning_rate", Value: "0.0003"}, {Name: "epoch", Value: "1.35"}, {Name: "grad_norm", Value: "1.02"},
			{Name: "checkpoint_step", Value: "400"}, {Name: "checkpoint_path", Value: "s3://acme-ckpt/mnist/step-400"}},
		Checkpoint:              &kilnv1.Checkpoint{Step: 400, Path: "s3://acme-ckpt/mnist/step-400"},
		ProgressDeadlineSeconds: i64(900),
		StallTime:               timestamppb.New(now.Add(15*time.Minute - 12*time.Second)),
	}
	return j
}

// lossCurve is a loss history of n points, one report every 5 steps, falling from 2.5.
func lossCurve(n int) *kilnv1.GetTrainJobMetricsResponse {
	s := &kilnv1.MetricSeries{Name: "loss", Stride: 1}
	lr := &kilnv1.MetricSeries{Name: "learning_rate", Stride: 1}
	for i := range n {
		at := timestamppb.New(kilntest.Now.Add(time.Duration(i-n) * 5 * time.Second))
		step := i64(int64(5 * (i + 1)))
		s.Points = append(s.Points, &kilnv1.MetricPoint{Time: at, Step: step, Value: 0.5 + 2*math.Exp(-float64(i)/25) + 0.02*float64(i%3)})
		lr.Points = append(lr.Points, &kilnv1.MetricPoint{Time: at, Step: step, Value: 0.0003})
	}
	return &kilnv1.GetTrainJobMetricsResponse{Series: []*kilnv1.MetricSeries{lr, s}, Reports: int64(n)}
}

// stalled is a job Kiln restarted once because it reported nothing for its progress
// deadline; it reports steps, but not how many there will be.
func stalled() *kilnv1.TrainJob {
	now := kilntest.Now
	j := running()
	j.Status.Restarts = &kilnv1.Restarts{Count: 1, LastReason: "ProgressStalled", LastRestartTime: timestamppb.New(now.Add(-5 * time.Minute)),
		LastMessage: "no progress reported for 15m0s (its kiln.dev/progress-deadline is 15m0s): restarting all its pods once; a second stall fails the job"}
	j.Status.Progress = &kilnv1.Progress{
		Step: i64(1200), UpdateTime: timestamppb.New(now.Add(-20 * time.Minute)),
		Metrics:                 []*kilnv1.Metric{{Name: "step", Value: "1200"}, {Name: "loss", Value: "nan"}},
		ProgressDeadlineSeconds: i64(900),
		StallTime:               timestamppb.New(now.Add(10 * time.Minute)),
	}
	return j
}

// deadlineExceeded is that job after it went silent again: failed, its stall time gone.
func deadlineExceeded() *kilnv1.TrainJob {
	now := kilntest.Now
	j := stalled()
	j.Status.State, j.Status.Reason = kilnv1.State_STATE_FAILED, "ProgressDeadlineExceeded"
	j.Status.Message = "TrainJob reported no progress for 25m0s (its kiln.dev/progress-deadline is 15m0s), again after its pods were restarted for the same reason: failed, deleting its JobSet"
	j.Status.CompletionTime, j.Status.DeadlineTime, j.Status.Steps = timestamppb.New(now.Add(-time.Minute)), nil, nil
	j.Status.Progress.Percent, j.Status.Progress.StallTime = i32(37), nil
	return j
}

// stallEvents are the operator's events of that job: started, restarted for its silence, failed.
func stallEvents() []*kilnv1.Event {
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(kilntest.Now.Add(-d)) }
	return []*kilnv1.Event{
		{Type: "Normal", Reason: "Running", Object: "TrainJob/mnist", Count: 1, FirstTime: at(17 * time.Minute), LastTime: at(17 * time.Minute)},
		{Type: "Warning", Reason: "Restarted", Object: "TrainJob/mnist", Count: 1, FirstTime: at(5 * time.Minute), LastTime: at(5 * time.Minute),
			Message: "restarting all pods (restart 1; not counted against maxRestarts, 0 of 0 used): ProgressStalled: no progress reported for 15m0s (its kiln.dev/progress-deadline is 15m0s): restarting all its pods once; a second stall fails the job"},
		{Type: "Warning", Reason: "ProgressDeadlineExceeded", Object: "TrainJob/mnist", Count: 1, FirstTime: at(time.Minute), LastTime: at(time.Minute),
			Message: "TrainJob reported no progress for 25m0s (its kiln.dev/progress-deadline is 15m0s), again after its pods were restarted for the same reason: failed, deleting its JobSet"},
	}
}

// A job that does not report has no Progress section, and describe asks for no metrics.
func TestDescribeWithoutProgress(t *testing.T) {
	io, _, _, _ := iostreams.Test()
	if out := Describe(io, kilntest.Now, running(), Related{}); strings.Contains(out, "Progress:") {
		t.Errorf("a job that never reported has a Progress section:\n%s", out)
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
	if s.MetricsCalls != 0 {
		t.Errorf("%d GetTrainJobMetrics calls for a job that does not report, want none", s.MetricsCalls)
	}
}

// A reporting job's curve comes from GetTrainJobMetrics, over the wire.
func TestDescribeCommandDrawsTheCurve(t *testing.T) {
	s := kilntest.Start(t)
	s.Put(reporting())
	s.Metrics = map[string]*kilnv1.GetTrainJobMetricsResponse{"mnist": lossCurve(120)}
	f, io := s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f, Name: "mnist"}); err != nil {
		t.Fatal(err)
	}
	want := "  Curve:        loss, min 0.5186, last 0.5571, steps 5 to 600\n                █▇▇▆"
	if out := io.Out.(interface{ String() string }).String(); !strings.Contains(out, want) || s.MetricsCalls != 1 {
		t.Errorf("%d GetTrainJobMetrics calls, output without %q:\n%s", s.MetricsCalls, want, out)
	}
}
