package convert

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

const pyTorchJob = `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist}
spec:
  pytorchReplicaSpecs:
    Master: {template: {spec: {containers: [{name: pytorch, image: mnist:1, command: [torchrun, --nnodes=2, mnist.py]}]}}}
    Worker: {template: {spec: {containers: [{name: pytorch, image: mnist:1, command: [torchrun, --nnodes=2, mnist.py]}]}}}
`

var answer = &kilnv1.ConvertManifestsResponse{
	Manifests: []*kilnv1.ConvertedManifest{{Kind: "TrainJob", Name: "mnist", Namespace: "team-nlp", Source: "PyTorchJob/mnist",
		Manifest: "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: mnist\n  namespace: team-nlp\n"}},
	Warnings: []*kilnv1.ConversionWarning{
		{Source: "PyTorchJob/mnist", Field: "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command", Message: "removed the torchrun flags --nnodes=2", Note: true},
		{Source: "PyTorchJob/mnist", Field: "spec.runPolicy.backoffLimit", Message: "3: Kiln restarts the whole group"},
	},
}

// The file goes to the server as it is, with the runtime and the namespace of -n; the
// manifests come out on standard output, the warnings (and notes, unless --quiet) on
// standard error.
func TestConvert(t *testing.T) {
	s := kilntest.Start(t)
	s.ConvertAnswer = answer
	file := filepath.Join(t.TempDir(), "pytorchjob.yaml")
	if err := os.WriteFile(file, []byte(pyTorchJob), 0o600); err != nil {
		t.Fatal(err)
	}
	f, io := s.Factory(false)
	f.Namespace = "team-nlp"
	if err := run(t.Context(), &Options{Factory: f, File: file, Runtime: "torch-distributed-spot"}); err != nil {
		t.Fatal(err)
	}
	want := &kilnv1.ConvertManifestsRequest{Manifests: pyTorchJob, Runtime: "torch-distributed-spot", Namespace: "team-nlp"}
	if diff := cmp.Diff([]*kilnv1.ConvertManifestsRequest{want}, s.Converted, protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	kilntest.Golden(t, "convert-out", io.Out.(interface{ String() string }).String())
	kilntest.Golden(t, "convert-err", io.ErrOut.(interface{ String() string }).String())

	f, io = s.Factory(false)
	io.In = strings.NewReader(pyTorchJob)
	f.IO = io
	if err := run(t.Context(), &Options{Factory: f, File: "-", Quiet: true}); err != nil {
		t.Fatal(err)
	}
	if got := io.ErrOut.(interface{ String() string }).String(); strings.Contains(got, "note:") || !strings.Contains(got, "warning:") {
		t.Errorf("--quiet printed %q: want the warnings only", got)
	}
	if got := s.Converted[1].GetManifests(); got != pyTorchJob {
		t.Errorf("standard input sent as %q", got)
	}
}

func TestConvertRefuses(t *testing.T) {
	s := kilntest.Start(t)
	f, _ := s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f}); factory.ExitCode(err) != 2 {
		t.Errorf("no -f: %v (exit %d), want a usage error", err, factory.ExitCode(err))
	}
	if err := run(t.Context(), &Options{Factory: f, File: "/nonexistent.yaml"}); err == nil || !strings.Contains(err.Error(), "reading the manifests") {
		t.Errorf("a missing file: %v", err)
	}
	file := filepath.Join(t.TempDir(), "deploy.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: apps/v1\nkind: Deployment\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), &Options{Factory: f, File: file}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("a kind the server refuses: %v, want InvalidArgument", err)
	}
	if len(s.Converted) != 1 {
		t.Errorf("%d requests sent, want 1 (only the readable file)", len(s.Converted))
	}
}
