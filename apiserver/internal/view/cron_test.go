package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
)

func TestCronTrainJobConcurrencyPolicy(t *testing.T) {
	cases := map[kiln.ConcurrencyPolicy]kilnv1.ConcurrencyPolicy{
		"":                     kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_ALLOW,
		kiln.AllowConcurrent:   kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_ALLOW,
		kiln.ForbidConcurrent:  kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_FORBID,
		kiln.ReplaceConcurrent: kilnv1.ConcurrencyPolicy_CONCURRENCY_POLICY_REPLACE,
	}
	for policy, want := range cases {
		t.Run(string(policy), func(t *testing.T) {
			cj := &kiln.CronTrainJob{Spec: kiln.CronTrainJobSpec{Schedule: "@daily", ConcurrencyPolicy: policy}}
			got := CronTrainJob(cj, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).GetSpec().GetConcurrencyPolicy()
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("concurrency policy (-want +got):\n%s", diff)
			}
		})
	}
}
