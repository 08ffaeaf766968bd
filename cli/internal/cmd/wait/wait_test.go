package wait

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestWaitExitCodes(t *testing.T) {
	for name, tc := range map[string]struct {
		forState string
		becomes  kilnv1.State
		deleted  bool
		timeout  time.Duration
		wantCode int
		wantErr  string
	}{
		"reaches it":              {forState: "Complete", becomes: kilnv1.State_STATE_COMPLETE, wantCode: factory.ExitOK},
		"fails instead":           {forState: "Complete", becomes: kilnv1.State_STATE_FAILED, wantCode: factory.ExitFailed},
		"waits for failure":       {forState: "failed", becomes: kilnv1.State_STATE_FAILED, wantCode: factory.ExitOK},
		"completes instead":       {forState: "Failed", becomes: kilnv1.State_STATE_COMPLETE, wantCode: factory.ExitError, wantErr: "will never be Failed"},
		"times out":               {forState: "Complete", timeout: 300 * time.Millisecond, wantCode: factory.ExitTimeout, wantErr: "timed out after 300ms"},
		"deleted":                 {forState: "Complete", deleted: true, wantCode: factory.ExitError, wantErr: "was deleted before it was Complete"},
		"not a state":             {forState: "Done", wantCode: factory.ExitUsage, wantErr: `unknown state "Done"`},
		"already in it (running)": {forState: "Running", wantCode: factory.ExitOK},
	} {
		t.Run(name, func(t *testing.T) {
			s := kilntest.Start(t)
			s.Put(kilntest.Job("team", "j", kilnv1.State_STATE_RUNNING))
			f, _ := s.Factory(false)
			clk := clocktesting.NewFakeClock(kilntest.Now)
			f.Clock = clk
			go func() {
				// Once the command watches the job, so that it sees the change happen.
				if s.WaitForWatches(t.Context(), 1) != nil {
					return
				}
				switch {
				case tc.deleted:
					f, _ := s.Factory(false)
					c, _ := f.Client()
					_, _ = c.Jobs.DeleteTrainJob(t.Context(), connectReq("team", "j"))
				case tc.becomes != kilnv1.State_STATE_UNSPECIFIED:
					s.Put(kilntest.Job("team", "j", tc.becomes))
				case tc.timeout > 0:
					clk.Step(tc.timeout)
				}
			}()
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			err := run(t.Context(), &Options{Factory: f, Name: "j", For: tc.forState, Timeout: timeout})
			if got := factory.ExitCode(err); got != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d", got, err, tc.wantCode)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}

// A job that is not there is one line, as the API server words a missing job.
func TestWaitForAMissingJob(t *testing.T) {
	s := kilntest.Start(t)
	f, _ := s.Factory(false)
	err := run(t.Context(), &Options{Factory: f, Name: "missing", For: "Complete"})
	if got := factory.ExitCode(err); got != factory.ExitError {
		t.Errorf("exit code %d (%v), want %d", got, err, factory.ExitError)
	}
	if msg := factory.Message(err, s.URL); msg != "TrainJob team/missing not found" {
		t.Errorf("message %q", msg)
	}
}

// reporting is job j, in state, whose trainer reported percent at step of 1000.
func reporting(state kilnv1.State, percent int32, step int64) *kilnv1.TrainJob {
	j := kilntest.Job("team", "j", state)
	eta := 900 - 9*percent
	total := int64(1000)
	j.Status.Progress = &kilnv1.Progress{Percent: &percent, Step: &step, TotalSteps: &total, EtaSeconds: &eta,
		UpdateTime: timestamppb.New(kilntest.Now), Metrics: []*kilnv1.Metric{{Name: "loss", Value: "2.5"}}}
	return j
}

// In a pipe, kiln wait writes a plain line of the job's progress when its state or its
// percent changes (a new percent at most every 10 s: the clock stands still here), and its
// final line as before.
func TestWaitInAPipeWritesPlainProgressLines(t *testing.T) {
	s := kilntest.Start(t)
	s.Put(reporting(kilnv1.State_STATE_RUNNING, 10, 100))
	f, io := s.Factory(false)
	go func() {
		if s.WaitForWatches(t.Context(), 1) != nil {
			return
		}
		s.Put(reporting(kilnv1.State_STATE_RUNNING, 10, 105)) // the same percent
		s.Put(reporting(kilnv1.State_STATE_RUNNING, 40, 400)) // a new one, too soon
		s.Put(reporting(kilnv1.State_STATE_COMPLETE, 100, 1000))
	}()
	if err := run(t.Context(), &Options{Factory: f, Name: "j", For: "Complete", Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if got, want := io.ErrOut.(interface{ String() string }).String(), "j  Running  10%  step 100/1000  loss 2.5  ETA 13m30s\nj  Complete  100%  step 1000/1000  loss 2.5\n"; got != want {
		t.Errorf("standard error\n got %q\nwant %q", got, want)
	}
	if got, want := io.Out.(interface{ String() string }).String(), "trainjob team/j Complete\n"; got != want {
		t.Errorf("standard output %q, want %q", got, want)
	}
}
