package service

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// FuzzCreateTrainJobRequest decodes arbitrary bytes as a create request, in protobuf and
// in JSON as the Connect protocol carries them, and turns what decodes into a TrainJob:
// never a panic; either a TrainJob that encodes, or errors that each name a request field.
func FuzzCreateTrainJobRequest(f *testing.F) {
	seeds := []*kilnv1.CreateTrainJobRequest{
		{Namespace: "team", RequestId: "r-1", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: &kilnv1.NewTrainJob{
			Name: "mnist", Spec: &kilnv1.TrainJobSpec{Runtime: "torch-distributed", Nodes: 2, Env: []*kilnv1.EnvVar{{Name: "A", Value: "1"}},
				ResourcesPerNode: &kilnv1.Resources{Limits: map[string]string{"nvidia.com/gpu": "8"}}},
		}}},
		{Namespace: "team", Source: &kilnv1.CreateTrainJobRequest_Manifest{Manifest: "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: j}\nspec: {runtimeRef: {name: r}}\n"}},
		{Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: &kilnv1.NewTrainJob{GenerateName: "x-"}}},
	}
	for _, s := range seeds {
		b, _ := proto.Marshal(s)
		f.Add(b, false)
		j, _ := protojson.Marshal(s)
		f.Add(j, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		m := &kilnv1.CreateTrainJobRequest{}
		var err error
		if isJSON {
			err = protojson.Unmarshal(data, m)
		} else {
			err = proto.Unmarshal(data, m)
		}
		if err != nil {
			return
		}
		tj, errs := trainJobFrom(m)
		if (tj == nil) == (len(errs) == 0) {
			t.Fatalf("trainJobFrom(%v) = %v, %v: want exactly one of a job and errors", m, tj, errs)
		}
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "train_job") && !strings.HasPrefix(e.Field, "manifest") && e.Field != "namespace" &&
				e.Field != "source" && e.Field != "request_id" {
				t.Fatalf("error names no request field: %v", e)
			}
		}
		if tj == nil {
			return
		}
		if tj.Namespace == "" || (tj.Name == "" && tj.GenerateName == "") {
			t.Fatalf("a TrainJob without namespace or name: %+v", tj.ObjectMeta)
		}
		data, err = json.Marshal(tj)
		if err != nil {
			t.Fatalf("the TrainJob does not encode: %v", err)
		}
		if err := json.Unmarshal(data, &trainer.TrainJob{}); err != nil {
			t.Fatalf("the TrainJob does not decode: %v", err)
		}
	})
}
