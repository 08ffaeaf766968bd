package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestResolveRunPolicy(t *testing.T) {
	cases := map[string]struct {
		spec    TrainJobSpec
		runtime *RunPolicy
		want    EffectiveRunPolicy
	}{
		"neither": {},
		"runtime defaults": {
			runtime: &RunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3600), TTLSecondsAfterFinished: ptr.To[int32](60)},
			want:    EffectiveRunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3600), TTLSecondsAfterFinished: ptr.To[int32](60)},
		},
		"the TrainJob wins": {
			spec:    TrainJobSpec{ActiveDeadlineSeconds: ptr.To[int64](10), TTLSecondsAfterFinished: ptr.To[int32](0)},
			runtime: &RunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3600), TTLSecondsAfterFinished: ptr.To[int32](60)},
			want:    EffectiveRunPolicy{ActiveDeadlineSeconds: ptr.To[int64](10), TTLSecondsAfterFinished: ptr.To[int32](0)},
		},
		"one from each": {
			spec:    TrainJobSpec{TTLSecondsAfterFinished: ptr.To[int32](5)},
			runtime: &RunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3600)},
			want:    EffectiveRunPolicy{ActiveDeadlineSeconds: ptr.To[int64](3600), TTLSecondsAfterFinished: ptr.To[int32](5)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ResolveRunPolicy(&tc.spec, tc.runtime)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ResolveRunPolicy() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
