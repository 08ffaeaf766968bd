package trainjob

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// conditions prints a status's conditions in order as "Type=Status/Reason".
func conditions(st *trainer.TrainJobStatus) []string {
	var out []string
	for _, c := range st.Conditions {
		out = append(out, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	return out
}

func TestObserve(t *testing.T) {
	job := kilntesting.MakeTrainJob("job", "ns")
	cases := map[string]struct {
		tj             *trainer.TrainJob
		js             *jobsetv1alpha2.JobSet
		wantConditions []string
		wantJobs       []trainer.JobStatus
	}{
		"no JobSet yet": {tj: job.Clone().Obj()},
		"counts mirrored": {
			tj: job.Clone().Obj(), js: kilntesting.MakeJobSet(job.Obj()).ReplicatedJobStatus("node", 2, 0, 0, 2, 0).Obj(),
			wantJobs: []trainer.JobStatus{{Name: "node", Ready: ptr.To[int32](2), Succeeded: ptr.To[int32](0), Failed: ptr.To[int32](0), Active: ptr.To[int32](2), Suspended: ptr.To[int32](0)}},
		},
		"the JobSet completed": {
			tj:             job.Clone().Obj(),
			js:             kilntesting.MakeJobSet(job.Obj()).Condition(jobsetv1alpha2.JobSetCompleted, metav1.ConditionTrue, "AllJobsCompleted", "done").Obj(),
			wantConditions: []string{"Complete=True/AllJobsCompleted"},
		},
		"the JobSet failed": {
			tj:             job.Clone().Obj(),
			js:             kilntesting.MakeJobSet(job.Obj()).Condition(jobsetv1alpha2.JobSetFailed, metav1.ConditionTrue, "FailedJobs", "a job failed").Obj(),
			wantConditions: []string{"Failed=True/FailedJobs"},
		},
		"a finished job keeps its outcome whatever the JobSet says later": {
			tj:             job.Clone().Condition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason, "").Obj(),
			js:             kilntesting.MakeJobSet(job.Obj()).Condition(jobsetv1alpha2.JobSetCompleted, metav1.ConditionTrue, "AllJobsCompleted", "").Obj(),
			wantConditions: []string{"Failed=True/DeadlineExceeded"},
		},
		"suspended": {tj: job.Clone().Suspend(true).Obj(), wantConditions: []string{"Suspended=True/Suspended"}},
		"resumed": {
			tj:             job.Clone().Suspend(false).Condition(trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason, "").Obj(),
			wantConditions: []string{"Suspended=False/Resumed"},
		},
		"completed after a resume: the True condition last, for the State column": {
			tj:             job.Clone().Suspend(false).Condition(trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason, "").Obj(),
			js:             kilntesting.MakeJobSet(job.Obj()).Condition(jobsetv1alpha2.JobSetCompleted, metav1.ConditionTrue, "AllJobsCompleted", "").Obj(),
			wantConditions: []string{"Suspended=False/Resumed", "Complete=True/AllJobsCompleted"},
		},
		"finished while suspended: keeps its Suspended condition": {
			tj:             job.Clone().Suspend(false).Condition(trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason, "").Obj(),
			js:             kilntesting.MakeJobSet(job.Obj()).Condition(jobsetv1alpha2.JobSetCompleted, metav1.ConditionTrue, "AllJobsCompleted", "").Obj(),
			wantConditions: []string{"Suspended=True/Suspended", "Complete=True/AllJobsCompleted"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := observe(tc.tj, tc.js)
			if diff := cmp.Diff(tc.wantConditions, conditions(st)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantJobs, st.JobsStatus); diff != "" {
				t.Errorf("jobsStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuntimeAvailability(t *testing.T) {
	missing := kilntesting.MakeTrainJob("job", "ns").Condition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobRuntimeNotFoundReason, "")
	cases := map[string]struct {
		tj             *trainer.TrainJob
		applyErr       error
		wantConditions []string
		wantEvents     int
	}{
		"found, never missing":  {tj: kilntesting.MakeTrainJob("job", "ns").Obj()},
		"missing":               {tj: kilntesting.MakeTrainJob("job", "ns").Obj(), applyErr: errRuntimeNotFound, wantConditions: []string{"Failed=True/RuntimeNotFound"}, wantEvents: 1},
		"found after missing":   {tj: missing.Clone().Obj(), wantConditions: []string{"Failed=False/RuntimeFound"}},
		"another error: as was": {tj: missing.Clone().Obj(), applyErr: errors.New("apiserver busy"), wantConditions: []string{"Failed=True/RuntimeNotFound"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.tj.Status.DeepCopy()
			evs := runtimeAvailability(tc.tj, st, tc.applyErr)
			if diff := cmp.Diff(tc.wantConditions, conditions(st)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if len(evs) != tc.wantEvents {
				t.Errorf("%d events, want %d", len(evs), tc.wantEvents)
			}
		})
	}
}

func TestObserveRestarts(t *testing.T) {
	job := kilntesting.MakeTrainJob("job", "ns").Obj()
	at := metav1.NewTime(metav1.Now().Rfc3339Copy().Time)
	withPolicy := func(restarts, counted int32, conds ...metav1.Condition) *jobsetv1alpha2.JobSet {
		js := kilntesting.MakeJobSet(job).Obj()
		js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3}
		js.Status.Restarts, js.Status.RestartsCountTowardsMax = restarts, counted
		js.Status.Conditions = conds
		return js
	}
	restarting := func(reason string) metav1.Condition {
		return metav1.Condition{Type: string(jobsetv1alpha2.JobSetRestarting), Status: metav1.ConditionTrue, Reason: reason,
			Message: "applying a failure policy action (first failed job: job-node-1)", LastTransitionTime: at}
	}
	const seenLate = "restart 1, seen after the new pods started (JobSet's reason for it was gone)"
	earlier := &trainer.RestartsStatus{Count: 1, CountedTowardsMax: 0, MaxRestarts: 3, LastReason: "Disruption", LastMessage: "before", LastRestartTime: &at}
	for name, tc := range map[string]struct {
		prev *trainer.RestartsStatus
		js   *jobsetv1alpha2.JobSet
		want *trainer.RestartsStatus
	}{
		"no failure policy, no restarts: nothing to say":   {js: kilntesting.MakeJobSet(job).Obj()},
		"a failure policy: the budget, before any restart": {js: withPolicy(0, 0), want: &trainer.RestartsStatus{MaxRestarts: 3}},
		"a disruption rule restarted it": {
			js:   withPolicy(1, 0, restarting("FailurePolicy_Disruption")),
			want: &trainer.RestartsStatus{Count: 1, MaxRestarts: 3, LastReason: "Disruption", LastMessage: "applying a failure policy action (first failed job: job-node-1)", LastRestartTime: &at},
		},
		"no rule matched: a counted failure": {
			prev: earlier,
			js:   withPolicy(2, 1, restarting("DefaultFailurePolicy")),
			want: &trainer.RestartsStatus{Count: 2, CountedTowardsMax: 1, MaxRestarts: 3, LastReason: "Failure", LastMessage: "applying a failure policy action (first failed job: job-node-1)", LastRestartTime: &at},
		},
		"the same restart again: its reason stays once the JobSet is ready": {
			prev: earlier,
			js:   withPolicy(1, 0, metav1.Condition{Type: string(jobsetv1alpha2.JobSetRestarting), Status: metav1.ConditionFalse, Reason: "JobsReady"}),
			want: earlier,
		},
		"a restart seen only after it finished: counted, a failure": {
			js:   withPolicy(1, 1),
			want: &trainer.RestartsStatus{Count: 1, CountedTowardsMax: 1, MaxRestarts: 3, LastReason: "Failure", LastMessage: seenLate},
		},
		"a restart seen only after it finished: uncounted, the runtime's one rule that does not count": {
			js: func() *jobsetv1alpha2.JobSet {
				js := withPolicy(1, 0)
				js.Spec.FailurePolicy.Rules = []jobsetv1alpha2.FailurePolicyRule{
					{Name: "Disruption", Action: jobsetv1alpha2.RestartJobSetAndIgnoreMaxRestarts}, {Name: "NonRetriable", Action: jobsetv1alpha2.FailJobSet},
				}
				return js
			}(),
			want: &trainer.RestartsStatus{Count: 1, MaxRestarts: 3, LastReason: "Disruption", LastMessage: seenLate},
		},
		"a restart seen only after it finished: uncounted, by a rule unknown": {
			js:   withPolicy(1, 0),
			want: &trainer.RestartsStatus{Count: 1, MaxRestarts: 3, LastReason: "Uncounted", LastMessage: seenLate},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, observeRestarts(tc.prev, tc.js)); diff != "" {
				t.Errorf("restarts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailureMessage(t *testing.T) {
	rs := &trainer.RestartsStatus{Count: 1, CountedTowardsMax: 1, MaxRestarts: 1}
	for _, tc := range []struct {
		reason, want string
	}{
		{ReasonReachedMaxRestarts, "failed again after 1 restarts counted against its runtime's failurePolicy.maxRestarts (1), so it is not restarted: msg"},
		{ReasonFailJobSet, "failed with a failure its runtime's failure policy does not retry (a FailJobSet rule, e.g. a non-retriable exit code): msg"},
		{"FailedJobs", "msg"},
	} {
		if got := failureMessage(&metav1.Condition{Reason: tc.reason, Message: "msg"}, rs); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.reason, got, tc.want)
		}
	}
}
