package jobs

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }

// reporting is a job in state whose trainer reported percent (when not negative) at step
// of 1000, with its loss and ETA.
func reporting(state kilnv1.State, percent int32, step int64) *kilnv1.TrainJob {
	p := &kilnv1.Progress{Step: i64(step), TotalSteps: i64(1000), EtaSeconds: i32(190), UpdateTime: timestamppb.New(now),
		Metrics: []*kilnv1.Metric{{Name: "step", Value: "450"}, {Name: "loss", Value: "0.5321098"}}}
	if percent >= 0 {
		p.Percent = i32(percent)
	}
	return &kilnv1.TrainJob{Name: "my-job", Namespace: "team", Status: &kilnv1.TrainJobStatus{State: state, Progress: p}}
}

// In a pipe, a line comes when the state changes, or the whole percent does at most every
// 10 s; a job that does not report writes nothing.
func TestProgressInAPipe(t *testing.T) {
	running, complete := kilnv1.State_STATE_RUNNING, kilnv1.State_STATE_COMPLETE
	queued := &kilnv1.TrainJob{Name: "my-job", Status: &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_QUEUED, Reason: "Pending"}}
	io, _, _, errOut := iostreams.Test()
	at := now
	p := &Progress{IO: io, Now: func() time.Time { return at }}
	for _, ev := range []struct {
		after time.Duration
		job   *kilnv1.TrainJob
	}{
		{0, queued},                                                        // no progress yet: nothing
		{time.Second, reporting(running, 0, 0)},                            // the first report: a line
		{2 * time.Second, reporting(running, 0, 5)},                        // the same percent: none
		{5 * time.Second, reporting(running, 3, 30)},                       // 3%, 4 s after the last line: none yet
		{12 * time.Second, reporting(running, 4, 40)},                      // 4%, 11 s after it: a line
		{13 * time.Second, reporting(running, 5, 50)},                      // 5%, 1 s after it: none
		{14 * time.Second, reporting(kilnv1.State_STATE_SUSPENDED, 5, 50)}, // a new state: a line at once
		{15 * time.Second, reporting(running, -1, 60)},                     // and again, with no percent now
		{30 * time.Second, reporting(running, -1, 70)},                     // a step alone: none
		{31 * time.Second, reporting(complete, 100, 1000)},                 // the end: a line
	} {
		at = now.Add(ev.after)
		p.Show(ev.job)
	}
	p.Done()
	want := []string{
		"my-job  Running  0%  step 0/1000  loss 0.5321  ETA 3m10s",
		"my-job  Running  4%  step 40/1000  loss 0.5321  ETA 3m10s",
		"my-job  Suspended  5%  step 50/1000  loss 0.5321",
		"my-job  Running  step 60/1000  loss 0.5321  ETA 3m10s",
		"my-job  Complete  100%  step 1000/1000  loss 0.5321",
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")); diff != "" {
		t.Errorf("lines in a pipe (-want +got):\n%s", diff)
	}
}

// On a terminal the line is redrawn in place, with a bar; what does not fit the terminal
// goes, the least telling first.
func TestProgressOnATerminal(t *testing.T) {
	io, _, _, errOut := iostreams.Test()
	io.SetTTY(true)
	p := &Progress{IO: io, Now: func() time.Time { return now }}
	p.Show(&kilnv1.TrainJob{Name: "my-job", Status: &kilnv1.TrainJobStatus{State: kilnv1.State_STATE_QUEUED, Reason: "Pending"}})
	p.Show(reporting(kilnv1.State_STATE_RUNNING, 45, 450))
	long := reporting(kilnv1.State_STATE_RUNNING, 45, 450)
	long.Name = strings.Repeat("x", 30)
	p.Show(long)
	p.Done()
	io.SetWidth(100)
	p.Show(reporting(kilnv1.State_STATE_RUNNING, 45, 450))
	p.Done()
	want := "\rmy-job: \x1b[33mQueued\x1b[0m (Pending)\x1b[K" +
		// 80 columns: the loss goes.
		"\rmy-job  \x1b[34mRunning\x1b[0m  [#########-----------]  45%  step 450/1000  ETA 3m10s\x1b[K" +
		// A longer name: the step goes too.
		"\r" + long.Name + "  \x1b[34mRunning\x1b[0m  [#########-----------]  45%  ETA 3m10s\x1b[K" +
		"\r\x1b[K" +
		// 100 columns: all of it.
		"\rmy-job  \x1b[34mRunning\x1b[0m  [#########-----------]  45%  step 450/1000  loss 0.5321  ETA 3m10s\x1b[K" +
		"\r\x1b[K"
	if got := errOut.String(); got != want {
		t.Errorf("terminal output\n got %q\nwant %q", got, want)
	}
}
