package webhook

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/runtimes"
)

func catalogRuntime(t testing.TB, name string) *trainer.TrainingRuntimeSpec {
	t.Helper()
	rt, err := runtimes.ClusterTrainingRuntime(name)
	if err != nil {
		t.Fatal(err)
	}
	return &rt.Spec
}

func TestValidateRendering(t *testing.T) {
	torch := catalogRuntime(t, "torch-distributed")
	mpi := catalogRuntime(t, "mpi-distributed")
	// torch-distributed names its pods <name>-node-0-<rank>-<5 random>: 15 characters more
	// than the name up to 10 nodes, 16 from 11.
	cases := map[string]struct {
		job       *trainer.TrainJob
		runtime   string
		wantPaths []string
		wantIn    string
	}{
		"48 characters, 2 nodes: fits": {job: kilntesting.MakeTrainJob(strings.Repeat("a", 48), "ns").NumNodes(2).Obj()},
		"49 characters, 2 nodes: too long": {
			job: kilntesting.MakeTrainJob(strings.Repeat("a", 49), "ns").NumNodes(2).Obj(), wantPaths: []string{"metadata.name"},
			wantIn: "use a name of at most 48 characters",
		},
		"48 characters, 11 nodes: too long": {
			job: kilntesting.MakeTrainJob(strings.Repeat("a", 48), "ns").NumNodes(11).Obj(), wantPaths: []string{"metadata.name"},
			wantIn: "use a name of at most 47 characters",
		},
		"60 characters, from generateName": {
			job: func() *trainer.TrainJob {
				tj := kilntesting.MakeTrainJob(strings.Repeat("b", 55)+"x1y2z", "ns").Obj()
				tj.GenerateName = strings.Repeat("b", 55)
				return tj
			}(),
			wantPaths: []string{"metadata.generateName"}, wantIn: "use a generateName of at most 43 characters",
		},
		"an MPI hostfile larger than a ConfigMap": {
			job: kilntesting.MakeTrainJob("mpi", "ns").NumNodes(50_000).Obj(), runtime: "mpi-distributed",
			wantPaths: []string{"spec.trainer.numNodes"}, wantIn: "more than a ConfigMap holds",
		},
		"a name that is no DNS label": {
			job: kilntesting.MakeTrainJob("team.mnist", "ns").Obj(), wantPaths: []string{"metadata.name"}, wantIn: "must be a DNS label",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := torch
			if tc.runtime == "mpi-distributed" {
				rt = mpi
			}
			_, errs := validateRendering(tc.job, rt)
			if diff := cmp.Diff(tc.wantPaths, fields(errs)); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s\n%v", diff, errs)
			}
			if tc.wantIn != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.wantIn)) {
				t.Errorf("message %v does not say %q", errs, tc.wantIn)
			}
		})
	}
}

func TestValidateSize(t *testing.T) {
	cases := map[string]struct {
		job       *trainer.TrainJob
		wantPaths []string
	}{
		"no trainer":     {job: kilntesting.MakeTrainJob("j", "ns").Obj()},
		"one node":       {job: kilntesting.MakeTrainJob("j", "ns").NumNodes(1).Obj()},
		"zero nodes":     {job: kilntesting.MakeTrainJob("j", "ns").NumNodes(0).Obj(), wantPaths: []string{"spec.trainer.numNodes"}},
		"negative nodes": {job: kilntesting.MakeTrainJob("j", "ns").NumNodes(-2).Obj(), wantPaths: []string{"spec.trainer.numNodes"}},
		"zero processes": {job: func() *trainer.TrainJob {
			tj := kilntesting.MakeTrainJob("j", "ns").NumNodes(1).Obj()
			var z int32
			tj.Spec.Trainer.NumProcPerNode = &z
			return tj
		}(), wantPaths: []string{"spec.trainer.numProcPerNode"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantPaths, fields(validateSize(tc.job))); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
		})
	}
}

func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}
