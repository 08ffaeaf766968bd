package controller

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
