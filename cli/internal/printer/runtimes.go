package printer

import (
	"fmt"
	"strings"
	"time"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// RuntimeKind is a runtime's kind: ClusterTrainingRuntime or TrainingRuntime.
func RuntimeKind(rt *kilnv1.Runtime) string {
	if rt.GetKind() == kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED {
		return "TrainingRuntime"
	}
	return "ClusterTrainingRuntime"
}

// RuntimeDevices are the devices of each node of a runtime, e.g. nvidia.com/gpu=8, or "-".
func RuntimeDevices(rt *kilnv1.Runtime) string {
	var out []string
	for _, d := range rt.GetDevicesPerNode() {
		out = append(out, fmt.Sprintf("%s=%d", d.GetResource(), d.GetCount()))
	}
	return Dash(strings.Join(out, " "))
}

// RuntimeDeadline and RuntimeTTL are a runtime's run policy, "-" where it sets none.
func RuntimeDeadline(rt *kilnv1.Runtime) string {
	if rt.GetRunPolicy() == nil {
		return "-"
	}
	return seconds(rt.GetRunPolicy().ActiveDeadlineSeconds)
}

// RuntimeTTL: see RuntimeDeadline.
func RuntimeTTL(rt *kilnv1.Runtime) string {
	if rt.GetRunPolicy() == nil {
		return "-"
	}
	return seconds32(rt.GetRunPolicy().TtlSecondsAfterFinished)
}

func seconds(s *int64) string {
	if s == nil {
		return "-"
	}
	return Duration(time.Duration(*s) * time.Second)
}

func seconds32(s *int32) string {
	if s == nil {
		return "-"
	}
	v := int64(*s)
	return seconds(&v)
}
