package crds

import (
	"strings"
	"testing"
)

func TestDowngrade(t *testing.T) {
	for _, tc := range []struct {
		applied, version string
		refused          bool
	}{
		{"v0.3.0", "v0.2.0", true},
		{"v1.0.0", "v0.9.9", true},
		{"v0.3.0", "v0.3.0-rc.1", true},
		{"v0.2.0", "v0.3.0", false},
		{"v0.3.0", "v0.3.0", false},
		{"", "v0.2.0", false},    // applied by Helm (crds/) or a development build
		{"v0.3.0", "dev", false}, // a development build is not compared
		{"v0.3.0", "3ee131e", false},
	} {
		why := Downgrade("trainjobs.trainer.kubeflow.org", tc.applied, tc.version)
		if (why != "") != tc.refused {
			t.Errorf("Downgrade(%q, %q) = %q, want refused %v", tc.applied, tc.version, why, tc.refused)
		}
		if why != "" && !strings.Contains(why, "--allow-crd-downgrade") {
			t.Errorf("the refusal does not say how to go on: %s", why)
		}
	}
}
