package trainjob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestTransitions(t *testing.T) {
	job := kilntesting.MakeTrainJob("job", "ns")
	with := func(t, s, reason string) trainer.TrainJobStatus {
		return job.Clone().Condition(t, metav1.ConditionStatus(s), reason, "msg").Obj().Status
	}
	cases := map[string]struct {
		before, after trainer.TrainJobStatus
		queued        bool
		want          []string
	}{
		"nothing changed":             {before: with(trainer.TrainJobSuspended, "True", "Suspended"), after: with(trainer.TrainJobSuspended, "True", "Suspended")},
		"suspended":                   {after: with(trainer.TrainJobSuspended, "True", "Suspended"), want: []string{"Normal Suspended"}},
		"resumed":                     {before: with(trainer.TrainJobSuspended, "True", "Suspended"), after: with(trainer.TrainJobSuspended, "False", "Resumed"), want: []string{"Normal Resumed"}},
		"queued: Kueue tells":         {after: with(trainer.TrainJobSuspended, "True", "Suspended"), queued: true},
		"admitted: Kueue tells":       {before: with(trainer.TrainJobSuspended, "True", "Suspended"), after: with(trainer.TrainJobSuspended, "False", "Resumed"), queued: true},
		"queued job completed":        {after: with(trainer.TrainJobComplete, "True", "AllJobsCompleted"), queued: true, want: []string{"Normal Completed"}},
		"completed":                   {after: with(trainer.TrainJobComplete, "True", "AllJobsCompleted"), want: []string{"Normal Completed"}},
		"failed":                      {after: with(trainer.TrainJobFailed, "True", "FailedJobs"), want: []string{"Warning Failed"}},
		"deadline: own event":         {after: with(trainer.TrainJobFailed, "True", trainer.TrainJobDeadlineExceededReason)},
		"no runtime: own":             {after: with(trainer.TrainJobFailed, "True", trainer.TrainJobRuntimeNotFoundReason)},
		"JobSet refused: own":         {after: with(trainer.TrainJobFailed, "True", trainer.TrainJobJobSetRejectedReason)},
		"runtime found: quiet":        {before: with(trainer.TrainJobFailed, "True", trainer.TrainJobRuntimeNotFoundReason), after: with(trainer.TrainJobFailed, "False", trainer.TrainJobRuntimeFoundReason)},
		"pods ready":                  {after: trainer.TrainJobStatus{JobsStatus: ready(1)}, want: []string{"Normal Running"}},
		"still ready":                 {before: trainer.TrainJobStatus{JobsStatus: ready(1)}, after: trainer.TrainJobStatus{JobsStatus: ready(2)}},
		"ready again after a restart": {before: trainer.TrainJobStatus{JobsStatus: ready(0)}, after: trainer.TrainJobStatus{JobsStatus: ready(1)}, want: []string{"Normal Running"}},
		"done at once: Completed only": {after: func() trainer.TrainJobStatus {
			st := with(trainer.TrainJobComplete, "True", "AllJobsCompleted")
			st.JobsStatus = []trainer.JobStatus{{Name: "node", Succeeded: ptr.To[int32](1)}}
			return st
		}(), want: []string{"Normal Completed"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			tj := job.Clone().Obj()
			if tc.queued {
				tj = job.Clone().Queue("q").Obj()
			}
			tj.Status = tc.before
			for _, e := range transitions(tj, &tc.after) {
				got = append(got, e.kind+" "+e.reason)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRestartedEvent(t *testing.T) {
	disrupted := &trainer.RestartsStatus{Count: 1, CountedTowardsMax: 0, MaxRestarts: 3, LastReason: "Disruption", LastMessage: "applying RestartJobSetAndIgnoreMaxRestarts failure policy action (first failed job: job-node-1)"}
	crashed := &trainer.RestartsStatus{Count: 2, CountedTowardsMax: 1, MaxRestarts: 3, LastReason: "Failure", LastMessage: "applying RestartJobSet failure policy action (first failed job: job-node-0)"}
	for name, tc := range map[string]struct {
		before, after *trainer.RestartsStatus
		want          string
	}{
		"no restarts":          {after: &trainer.RestartsStatus{MaxRestarts: 3}},
		"the same restart":     {before: disrupted, after: disrupted},
		"a disruption":         {after: disrupted, want: "restarting all pods (restart 1; not counted against maxRestarts, 0 of 3 used): Disruption: applying RestartJobSetAndIgnoreMaxRestarts failure policy action (first failed job: job-node-1)"},
		"then a counted crash": {before: disrupted, after: crashed, want: "restarting all pods (restart 2; counted against maxRestarts, 1 of 3 used): Failure: applying RestartJobSet failure policy action (first failed job: job-node-0)"},
		"a JobSet made anew":   {before: crashed, after: &trainer.RestartsStatus{MaxRestarts: 3}},
	} {
		t.Run(name, func(t *testing.T) {
			got := ""
			if e := restarted(tc.before, tc.after); e != nil {
				got = e.kind + " " + e.reason + " " + e.note
			}
			if want := map[bool]string{true: "", false: "Warning Restarted " + tc.want}[tc.want == ""]; got != want {
				t.Errorf("event %q, want %q", got, want)
			}
		})
	}
}

func ready(n int32) []trainer.JobStatus {
	return []trainer.JobStatus{{Name: "node", Ready: ptr.To(n)}}
}
