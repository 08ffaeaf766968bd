package get

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestGet(t *testing.T) {
	s := kilntest.Start(t)
	s.Runtimes = []*kilnv1.Runtime{{Name: "torch-distributed", Framework: "torch", Nodes: 1, Deprecated: true,
		DevicesPerNode: []*kilnv1.Device{{Resource: "nvidia.com/gpu", Count: 8}}, RunPolicy: &kilnv1.RunPolicy{ActiveDeadlineSeconds: new(int64(28800))}}}
	f, io := s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f, Name: "torch-distributed"}); err != nil {
		t.Fatal(err)
	}
	want := "Name:           torch-distributed\nKind:           ClusterTrainingRuntime\nFramework:      torch\nImage:          -\nNodes:          1\n" +
		"Devices/node:   nvidia.com/gpu=8\nSteps:          \nDeadline:       8h\nTTL:            -\nDeprecated:     yes: pick another runtime for new jobs\n"
	if got := io.Out.(interface{ String() string }).String(); got != want {
		t.Errorf("output:\n%q\nwant:\n%q", got, want)
	}
	s.Runtimes[0].Topology = &kilnv1.TopologyRequest{Level: "rack", NodeLabel: "cloud.google.com/gce-topology-subblock", Preferred: true}
	f, io = s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f, Name: "torch-distributed"}); err != nil {
		t.Fatal(err)
	}
	if got, want := io.Out.(interface{ String() string }).String(), "Topology:       all training nodes in one rack (node label cloud.google.com/gce-topology-subblock), preferred: Kueue spreads them when none has room; a job overrides it with --topology\n"; !strings.Contains(got, want) {
		t.Errorf("output:\n%s\nlacks %q", got, want)
	}
	if err := run(t.Context(), &Options{Factory: f, Name: "torch-distributed", Output: "wide"}); factory.ExitCode(err) != factory.ExitUsage {
		t.Errorf("-o wide: %v, want a usage error", err)
	}
	if err := run(t.Context(), &Options{Factory: f, Name: "missing"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("a missing runtime: %v, want NotFound", err)
	}
}
