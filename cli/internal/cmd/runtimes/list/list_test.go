package list

import (
	"testing"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

// The catalog's runtimes on an 80-column terminal: every name whole (they are what
// --runtime takes), the other columns shrunk for them.
func TestListAt80Columns(t *testing.T) {
	s := kilntest.Start(t)
	gpus := []*kilnv1.Device{{Resource: "nvidia.com/gpu", Count: 8}}
	deadline := int64(8 * 3600)
	for _, rt := range []struct {
		name, framework string
	}{
		{"deepspeed-distributed", "deepspeed"}, {"jax-distributed", "jax"}, {"mpi-distributed", "mpi"},
		{"torch-distributed", "torch"}, {"torch-distributed-rack", "torch"}, {"torch-distributed-spot", "torch"}, {"xgboost-distributed", "xgboost"},
	} {
		s.Runtimes = append(s.Runtimes, &kilnv1.Runtime{Name: rt.name, Framework: rt.framework, Nodes: 1, DevicesPerNode: gpus,
			RunPolicy: &kilnv1.RunPolicy{ActiveDeadlineSeconds: &deadline}, Image: "ghcr.io/kiln-ml/" + rt.framework + "-runtime:v2.3.0-with-a-long-tag"})
	}
	// The rack runtime prefers one rack of its queue's Kueue Topology.
	s.Runtimes[4].Topology = &kilnv1.TopologyRequest{Level: "rack", NodeLabel: "cloud.google.com/gce-topology-subblock", Preferred: true}
	for name, tty := range map[string]bool{"tty-80": true, "pipe": false} {
		t.Run(name, func(t *testing.T) {
			f, io := s.Factory(tty)
			io.SetWidth(80)
			out, _, err := kilntest.Execute(NewCmdList(f, nil), io)
			if err != nil {
				t.Fatal(err)
			}
			kilntest.Golden(t, "runtimes-list-"+name, out)
		})
	}
}
