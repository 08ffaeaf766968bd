package create

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

// execute runs `kiln schedules create ARGS...` against s and returns what it printed.
func execute(t *testing.T, s *kilntest.Server, tty bool, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	f, io := s.Factory(tty)
	return kilntest.Execute(NewCmdCreate(f, nil), io, args...)
}

func TestCreateSendsTheScheduleAndItsRun(t *testing.T) {
	s := kilntest.Start(t)
	out, stderr, err := execute(t, s, true, "weekly-retrain", "--schedule", "0 2 * * 0", "--time-zone", "Europe/Berlin",
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
		{[]string{"x", "--runtime", "torch-distributed"}, "--schedule"},
		{[]string{"--schedule", "@daily", "--runtime", "torch-distributed"}, "name the schedule"},
		{[]string{"x", "--schedule", "@daily", "--concurrency-policy", "Sometimes", "--runtime", "r"}, "--concurrency-policy \"Sometimes\": want Allow, Forbid or Replace"},
		{[]string{"x", "--schedule", "@daily", "--keep-failed", "-2", "--runtime", "r"}, "--keep-failed -2"},
		{[]string{"x", "--schedule", "@daily", "--starting-deadline", "soon", "--runtime", "r"}, "--starting-deadline"},
		{[]string{"x", "--schedule", "@daily", "--wait", "--runtime", "r"}, "--wait and --follow"},
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
