package schedule

import (
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

// execute runs `kiln schedule ARGS...` against s and returns what it printed.
func execute(t *testing.T, s *kilntest.Server, tty bool, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	f, io := s.Factory(tty)
	cmd := NewCmdSchedule(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(io.Out)
	cmd.SetErr(io.ErrOut)
	err = cmd.Execute()
	return io.Out.(interface{ String() string }).String(), io.ErrOut.(interface{ String() string }).String(), err
}

func TestCreateSendsTheScheduleAndItsRun(t *testing.T) {
	s := kilntest.Start(t)
	out, stderr, err := execute(t, s, true, "create", "weekly-retrain", "--schedule", "0 2 * * 0", "--time-zone", "Europe/Berlin",
		"--concurrency-policy", "forbid", "--starting-deadline", "1h", "--keep-successful", "3", "--keep-failed", "0",
		"--runtime", "torch-distributed", "--queue", "default", "--deadline", "12h", "--label", "team=nlp", "--request-id", "fixed",
		"--", "torchrun", "train.py")
	if err != nil {
		t.Fatal(err)
	}
	want := &kilnv1.CreateCronTrainJobRequest{Namespace: "team", RequestId: "fixed", Source: &kilnv1.CreateCronTrainJobRequest_CronTrainJob{CronTrainJob: &kilnv1.NewCronTrainJob{
		Name: "weekly-retrain", Labels: map[string]string{"team": "nlp"},
		Spec: &kilnv1.CronTrainJobSpec{
			Schedule: "0 2 * * 0", TimeZone: "Europe/Berlin", ConcurrencyPolicy: kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID,
			StartingDeadlineSeconds: proto.Int64(3600), SuccessfulJobsHistoryLimit: proto.Int32(3), FailedJobsHistoryLimit: proto.Int32(0),
			TrainJob: &kilnv1.TrainJobTemplate{Labels: map[string]string{"team": "nlp"}, Spec: &kilnv1.TrainJobSpec{
				Runtime: "torch-distributed", Command: []string{"torchrun", "train.py"}, Queue: "default", ActiveDeadlineSeconds: proto.Int64(12 * 3600),
			}},
		},
	}}}
	if diff := cmp.Diff(want, s.CreatedSchedules[0], protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if out != "crontrainjob team/weekly-retrain created\n" {
		t.Errorf("stdout %q", out)
	}
	// Sunday 2026-11-29 02:00 in Berlin is 01:00 UTC: 5 days and 13 hours after the fixture's now.
	if !strings.Contains(stderr, "Next run: Sun 2026-11-29 02:00 CET (in 5d)") {
		t.Errorf("stderr %q: want the next run in Berlin time", stderr)
	}
}

func TestCreateUsageErrors(t *testing.T) {
	s := kilntest.Start(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "x", "--runtime", "torch-distributed"}, "--schedule"},
		{[]string{"create", "--schedule", "@daily", "--runtime", "torch-distributed"}, "name the schedule"},
		{[]string{"create", "x", "--schedule", "@daily", "--concurrency-policy", "Sometimes", "--runtime", "r"}, "--concurrency-policy \"Sometimes\": want Allow, Forbid or Replace"},
		{[]string{"create", "x", "--schedule", "@daily", "--keep-failed", "-2", "--runtime", "r"}, "--keep-failed -2"},
		{[]string{"create", "x", "--schedule", "@daily", "--starting-deadline", "soon", "--runtime", "r"}, "--starting-deadline"},
		{[]string{"create", "x", "--schedule", "@daily", "--wait", "--runtime", "r"}, "--wait and --follow"},
	} {
		_, _, err := execute(t, s, false, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want it to say %q", tc.args, err, tc.want)
		}
		var ue *factory.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v is not a usage error (exit 2)", tc.args, err)
		}
	}
	if len(s.CreatedSchedules) != 0 {
		t.Errorf("%d requests sent for wrong usage", len(s.CreatedSchedules))
	}
}

func TestListGetAndDescribe(t *testing.T) {
	s := kilntest.Start(t)
	s.PutSchedule(kilntest.Schedule("team", "weekly-retrain"))
	nightly := kilntest.Schedule("team", "nightly")
	nightly.Spec.Schedule, nightly.Spec.TimeZone, nightly.Spec.Suspend, nightly.Status = "@daily", "", true, &kilnv1.CronTrainJobStatus{}
	s.PutSchedule(nightly)
	s.PutSchedule(kilntest.Schedule("other", "elsewhere"))
	run := kilntest.Job("team", "weekly-retrain-29397720", kilnv1.State_STATE_RUNNING)
	run.Labels = map[string]string{"kiln.dev/cron-train-job": "weekly-retrain"}
	run.Annotations = map[string]string{"kiln.dev/scheduled-time": "2026-11-22T01:00:00Z"}
	s.Put(run)

	for name, args := range map[string][]string{
		"list-tty":  {"list"},
		"list-pipe": {"list", "-o", "wide"},
		"get":       {"get", "weekly-retrain"},
		"describe":  {"describe", "weekly-retrain"},
		"runs":      {"runs", "weekly-retrain"},
	} {
		out, _, err := execute(t, s, strings.HasSuffix(name, "tty") || name == "describe", args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kilntest.Golden(t, "schedule-"+name, out)
	}
	_, _, err := execute(t, s, false, "get", "missing")
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("get missing: %v, want NotFound", err)
	}
}

func TestSuspendResumeTriggerDelete(t *testing.T) {
	s := kilntest.Start(t)
	s.PutSchedule(kilntest.Schedule("team", "weekly-retrain"))
	out, _, err := execute(t, s, false, "suspend", "weekly-retrain")
	if err != nil || out != "crontrainjob team/weekly-retrain suspended\n" {
		t.Fatalf("suspend: %q, %v", out, err)
	}
	if got, _ := s.Schedules["team/weekly-retrain"]; !got.GetSpec().GetSuspend() {
		t.Error("the schedule is not suspended")
	}
	out, _, err = execute(t, s, false, "resume", "weekly-retrain")
	if err != nil || out != "crontrainjob team/weekly-retrain resumed\n" || s.Schedules["team/weekly-retrain"].GetSpec().GetSuspend() {
		t.Fatalf("resume: %q, %v", out, err)
	}
	out, _, err = execute(t, s, false, "trigger", "weekly-retrain", "--request-id", "r1")
	if err != nil || out != "trainjob team/weekly-retrain-mbcdf created (a run of schedule weekly-retrain)\n" {
		t.Fatalf("trigger: %q, %v", out, err)
	}
	if s.Triggered[0].GetRequestId() != "r1" {
		t.Errorf("trigger sent request id %q", s.Triggered[0].GetRequestId())
	}
	out, _, err = execute(t, s, false, "trigger", "weekly-retrain", "-o", "name")
	if err != nil || out != "weekly-retrain-mbcdf\n" || s.Triggered[1].GetRequestId() == "" {
		t.Fatalf("trigger -o name: %q, %v", out, err)
	}
	out, _, err = execute(t, s, false, "delete", "weekly-retrain", "--keep-runs")
	if err != nil || out != "crontrainjob team/weekly-retrain (its runs kept) deleted\n" {
		t.Fatalf("delete: %q, %v", out, err)
	}
	if _, _, err := execute(t, s, false, "delete", "weekly-retrain"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("deleting it again: %v, want NotFound", err)
	}
}
