package runtimes

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestCatalog(t *testing.T) {
	rts, err := ClusterTrainingRuntimes()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rt := range rts {
		got[rt.Name] = rt.Labels[trainer.LabelFramework]
		trainers := 0
		for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
			if rj.Template.Labels[trainer.LabelTrainJobAncestor] == trainer.AncestorTrainer {
				trainers++
				var hasNode bool
				for _, c := range rj.Template.Spec.Template.Spec.Containers {
					hasNode = hasNode || c.Name == trainer.NodeName
				}
				if !hasNode {
					t.Errorf("%s: trainer job %s has no container %q", rt.Name, rj.Name, trainer.NodeName)
				}
			}
		}
		if trainers != 1 {
			t.Errorf("%s: %d replicated jobs are the trainer, want 1", rt.Name, trainers)
		}
		if rt.Spec.MLPolicy == nil {
			t.Errorf("%s: no mlPolicy", rt.Name)
		}
	}
	want := map[string]string{
		"deepspeed-distributed":  "deepspeed",
		"jax-distributed":        "jax",
		"mpi-distributed":        "mpi",
		"torch-distributed":      "torch",
		"torch-distributed-rack": "torch",
		"torch-distributed-spot": "torch",
		"xgboost-distributed":    "xgboost",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("catalog mismatch (-want +got):\n%s", diff)
	}
}

func TestClusterTrainingRuntime(t *testing.T) {
	rt, err := ClusterTrainingRuntime("torch-distributed")
	if err != nil || rt.Name != "torch-distributed" {
		t.Fatalf("ClusterTrainingRuntime(torch-distributed) = %v, %v", rt, err)
	}
	if _, err := ClusterTrainingRuntime("no-such-runtime"); err == nil {
		t.Error("a runtime the catalog lacks was found")
	}
}
