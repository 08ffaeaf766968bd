package kiln

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// The SDK against a real Kiln API server: the local platform (make up), or any server the
// Kiln configuration names. Skipped unless KILN_SDK_LIVE=1 (make test sets it, with
// KILN_CONFIG pointing at the local platform's configuration).

func live(t *testing.T) (*Client, context.Context) {
	t.Helper()
	if os.Getenv("KILN_SDK_LIVE") != "1" {
		t.Skip("KILN_SDK_LIVE=1 runs this against the Kiln API server of the Kiln configuration")
	}
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c, ctx
}

func queue() string {
	if q := os.Getenv("KILN_SDK_QUEUE"); q != "" {
		return q
	}
	return "default"
}

func jobName(t *testing.T, c *Client, what string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "sdk-go-" + what + "-" + hex.EncodeToString(b)[:5]
	t.Cleanup(func() { _ = c.DeleteJob(context.Background(), "", name) })
	return name
}

// createSlow creates, through the generated client, a job whose simulated pods run for d.
func createSlow(t *testing.T, ctx context.Context, c *Client, name string, d time.Duration, deadline int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "slow-trainjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ads := ""
	if deadline > 0 {
		ads = fmt.Sprintf("activeDeadlineSeconds: %d", deadline)
	}
	manifest := strings.NewReplacer("NAME", name, "QUEUE", queue(), "DURATION", d.String(), "DEADLINE", ads).Replace(string(data))
	if _, err := c.Jobs.CreateTrainJob(ctx, connect.NewRequest(&kilnv1.CreateTrainJobRequest{Namespace: c.Namespace, Source: &kilnv1.CreateTrainJobRequest_Manifest{Manifest: manifest}})); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-timeout:
			t.Fatal("not true after 30s")
		case <-tick.C:
		}
	}
}

func TestLiveSubmitWaitLogsEvents(t *testing.T) {
	c, ctx := live(t)
	name := jobName(t, c, "quick")
	got, err := c.Train(ctx, TrainOptions{
		Runtime: "torch-distributed", Name: name, Queue: queue(), Labels: map[string]string{"team": "sdk-go"},
		Trainer:               &CustomTrainerContainer{Command: []string{"torchrun", "train.py"}, NumNodes: 2, ResourcesPerNode: map[string]string{"nvidia.com/gpu": "8"}},
		ActiveDeadlineSeconds: new(int64(28800)), TTLSecondsAfterFinished: new(int32(86400)),
	})
	if err != nil || got != name {
		t.Fatalf("Train: %q, %v", got, err)
	}
	var seen []Status
	j, err := c.WaitForJobStatus(ctx, name, []Status{StatusComplete}, WaitOptions{Timeout: 2 * time.Minute, Callbacks: []func(*TrainJob){func(j *TrainJob) { seen = append(seen, j.Status) }}})
	if err != nil || j.Reason != "AllJobsCompleted" || !slices.Contains(seen, StatusRunning) {
		t.Fatalf("WaitForJobStatus: %+v, %v (seen %v)", j, err, seen)
	}
	j, err = c.GetJob(ctx, "", name)
	if err != nil || len(j.Steps) != 2 || j.Steps[0].Devices["nvidia.com/gpu"] != 8 || *j.ActiveDeadlineSeconds != 28800 || *j.TTLSecondsAfterFinished != 86400 {
		t.Fatalf("GetJob: %+v, %v", j, err)
	}
	jobs, err := c.ListJobs(ctx, ListOptions{LabelSelector: "team=sdk-go", Statuses: []Status{StatusComplete}})
	if err != nil || len(jobs) != 1 || jobs[0].Name != name {
		t.Fatalf("ListJobs: %v, %v", jobs, err)
	}
	var lines []string
	for l, err := range c.GetJobLogs(ctx, name, LogOptions{Follow: true}) {
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 || lines[len(lines)-1] != "[kiln-sim] training complete" {
		t.Errorf("logs: %q", lines)
	}
	events, err := c.GetJobEvents(ctx, "", name)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range events {
		reasons = append(reasons, strings.SplitN(e.GetObject(), "/", 2)[0]+"/"+e.GetReason())
	}
	for _, want := range []string{"TrainJob/Created", "TrainJob/Completed", "Workload/Admitted"} {
		if !slices.Contains(reasons, want) {
			t.Errorf("events %v: no %s", reasons, want)
		}
	}
}

func TestLiveDeadlineFailsTheJob(t *testing.T) {
	c, ctx := live(t)
	name := jobName(t, c, "deadline")
	createSlow(t, ctx, c, name, time.Minute, 3)
	_, err := c.WaitForJobStatus(ctx, name, []Status{StatusComplete}, WaitOptions{Timeout: 90 * time.Second})
	var failed *JobFailedError
	if !errors.As(err, &failed) || failed.Job.Reason != "DeadlineExceeded" {
		t.Fatalf("WaitForJobStatus: %v", err)
	}
}

func TestLiveTTLDeletesTheFinishedJob(t *testing.T) {
	c, ctx := live(t)
	name := jobName(t, c, "ttl")
	if _, err := c.Train(ctx, TrainOptions{Runtime: "torch-distributed", Name: name, Trainer: &CustomTrainerContainer{NumNodes: 1}, TTLSecondsAfterFinished: new(int32(2))}); err != nil {
		t.Fatal(err)
	}
	if j, err := c.WaitForJobStatus(ctx, name, []Status{StatusComplete}, WaitOptions{}); err != nil || j.TTLDeleteTime == nil {
		t.Fatalf("WaitForJobStatus: %+v, %v", j, err)
	}
	if _, err := c.WaitForJobStatus(ctx, name, []Status{StatusFailed}, WaitOptions{Timeout: time.Minute}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the TTL: %v, want deleted", err)
	}
}

func TestLiveSuspendAndResumeUnderAQueue(t *testing.T) {
	c, ctx := live(t)
	name := jobName(t, c, "suspend")
	createSlow(t, ctx, c, name, time.Minute, 0)
	if _, err := c.WaitForJobStatus(ctx, name, []Status{StatusRunning}, WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	if j, err := c.SuspendJob(ctx, "", name); err != nil || j.Status != StatusSuspended {
		t.Fatalf("SuspendJob: %+v, %v", j, err)
	}
	if j, err := c.GetJob(ctx, "", name); err != nil || j.Status != StatusSuspended || j.DeadlineTime != nil {
		t.Fatalf("GetJob right after SuspendJob: %+v, %v", j, err)
	}
	// Once Kueue has stopped it (spec.suspend), the operator clears its start time; resuming
	// before that would find it never stopped, still Running.
	eventually(t, func() bool {
		j, err := c.GetJob(ctx, "", name)
		return err == nil && j.Raw.GetSpec().GetSuspend() && j.StartTime == nil && j.Status == StatusSuspended
	})
	if j, err := c.ResumeJob(ctx, "", name); err != nil || j.Status != StatusQueued {
		t.Fatalf("ResumeJob: %+v, %v", j, err)
	}
	if _, err := c.WaitForJobStatus(ctx, name, []Status{StatusRunning}, WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { j, err := c.GetJob(ctx, "", name); return err == nil && j.StartTime != nil })
}

func TestLivePermissionDeniedAndValidation(t *testing.T) {
	c, ctx := live(t)
	if _, err := c.ListJobs(ctx, ListOptions{Namespace: "kube-system"}); !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), "in namespace kube-system") {
		t.Errorf("ListJobs in kube-system: %v", err)
	}
	_, err := c.Train(ctx, TrainOptions{Runtime: "torch-distributed", Trainer: &CustomTrainerContainer{ResourcesPerNode: map[string]string{"nvidia.com/gpu": "eight"}}})
	var e *Error
	if !errors.As(err, &e) || e.Code != connect.CodeInvalidArgument || !slices.ContainsFunc(e.FieldViolations, func(v FieldViolation) bool {
		return v.Field == "train_job.spec.resources_per_node.requests[nvidia.com/gpu]"
	}) {
		t.Errorf("Train with a bad quantity: %v (%+v)", err, e)
	}
}

func TestLiveRetriedTrainCreatesOneJob(t *testing.T) {
	c, ctx := live(t)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	o := TrainOptions{Runtime: "torch-distributed", GenerateName: "sdk-go-retry-", Trainer: &CustomTrainerContainer{NumNodes: 1}, Labels: map[string]string{"retry": id[:8]}, RequestID: id}
	first, err := c.Train(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteJob(context.Background(), "", first) })
	if again, err := c.Train(ctx, o); err != nil || again != first {
		t.Fatalf("the retry: %q, %v; want %q", again, err, first)
	}
	if jobs, err := c.ListJobs(ctx, ListOptions{LabelSelector: "retry=" + id[:8]}); err != nil || len(jobs) != 1 {
		t.Fatalf("ListJobs: %v, %v", jobs, err)
	}
}

func TestLiveSchedule(t *testing.T) {
	c, ctx := live(t)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "sdk-go-weekly-" + hex.EncodeToString(b)[:5]
	t.Cleanup(func() { _ = c.DeleteSchedule(context.Background(), "", name, false) })
	s, err := c.CreateSchedule(ctx, ScheduleOptions{
		Name: name, Schedule: "0 2 * * 0", TimeZone: "Europe/Berlin", ConcurrencyPolicy: Forbid,
		SuccessfulJobsHistoryLimit: ptr(int32(2)), FailedJobsHistoryLimit: ptr(int32(1)),
		Run: TrainOptions{Runtime: "torch-distributed", Trainer: &CustomTrainerContainer{Command: []string{"torchrun", "train.py"}, NumNodes: 1},
			Queue: queue(), ActiveDeadlineSeconds: ptr(int64(12 * 3600))},
	})
	if err != nil {
		t.Fatal(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if next := s.NextScheduleTime; next == nil || next.In(berlin).Weekday() != time.Sunday || next.In(berlin).Hour() != 2 {
		t.Fatalf("next run %v: want a Sunday at 02:00 in Berlin", next)
	}
	if s, err = c.SuspendSchedule(ctx, "", name); err != nil || !s.Suspend || s.NextScheduleTime != nil {
		t.Fatalf("SuspendSchedule = %+v, %v", s, err)
	}
	if s, err = c.ResumeSchedule(ctx, "", name); err != nil || s.Suspend || s.NextScheduleTime == nil {
		t.Fatalf("ResumeSchedule = %+v, %v", s, err)
	}
	run, err := c.TriggerSchedule(ctx, "", name)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		runs, err := c.ListScheduleRuns(ctx, "", name)
		return err == nil && len(runs) == 1 && runs[0].Name == run
	})
	if err := c.DeleteSchedule(ctx, "", name, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		_, err := c.GetSchedule(ctx, "", name)
		return errors.Is(err, ErrNotFound)
	})
	eventually(t, func() bool {
		_, err := c.GetJob(ctx, "", run)
		return errors.Is(err, ErrNotFound)
	})
}
