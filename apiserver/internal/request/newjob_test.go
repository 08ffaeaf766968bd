package request

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestNewTrainJob(t *testing.T) {
	in := &kilnv1.NewTrainJob{
		Name:   "mnist",
		Labels: map[string]string{"team": "nlp"},
		Spec: &kilnv1.TrainJobSpec{
			Runtime: "torch-distributed", Image: "img", Command: []string{"torchrun", "train.py"}, Args: []string{"--epochs=3"},
			Env: []*kilnv1.EnvVar{{Name: "LR", Value: "0.1"}}, Nodes: 4, ProcsPerNode: 8,
			ResourcesPerNode: &kilnv1.Resources{Limits: map[string]string{"nvidia.com/gpu": "8", "memory": "64Gi"}},
			DatasetUri:       "hf://tatsu-lab/alpaca", ModelUri: "hf://meta/llama", Queue: "default", PriorityClass: "high",
			Suspend: true, ActiveDeadlineSeconds: ptr.To[int64](3600), TtlSecondsAfterFinished: ptr.To[int32](0),
		},
	}
	want := &trainer.TrainJob{
		TypeMeta: metav1.TypeMeta{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team", Labels: map[string]string{
			"team": "nlp", trainer.KueueQueueNameLabel: "default", trainer.KueuePriorityClassLabel: "high",
		}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed", Kind: ptr.To("ClusterTrainingRuntime"), APIGroup: ptr.To("trainer.kubeflow.org")},
			Trainer: &trainer.Trainer{
				Image: ptr.To("img"), Command: []string{"torchrun", "train.py"}, Args: []string{"--epochs=3"},
				Env: []corev1.EnvVar{{Name: "LR", Value: "0.1"}}, NumNodes: ptr.To[int32](4), NumProcPerNode: ptr.To[int32](8),
				ResourcesPerNode: &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "memory": resource.MustParse("64Gi")}},
			},
			Initializer: &trainer.Initializer{
				Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://tatsu-lab/alpaca")},
				Model:   &trainer.ModelInitializer{StorageUri: ptr.To("hf://meta/llama")},
			},
			Suspend: ptr.To(true), ActiveDeadlineSeconds: ptr.To[int64](3600), TTLSecondsAfterFinished: ptr.To[int32](0),
		},
	}
	got, errs := NewTrainJob("team", in, field.NewPath("train_job"))
	if len(errs) > 0 {
		t.Fatalf("NewTrainJob() errors: %v", errs)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewTrainJob() mismatch (-want +got):\n%s", diff)
	}
}

// Resources spelt as the Kubeflow SDK spells them are Kubernetes' names.
func TestResourcesInKubeflowsSpelling(t *testing.T) {
	in := &kilnv1.NewTrainJob{Name: "a", Spec: &kilnv1.TrainJobSpec{Runtime: "r", ResourcesPerNode: &kilnv1.Resources{Limits: map[string]string{
		"gpu": "1", "CPU": "2", "Memory": "4Gi", "storage": "10Gi", "mig-1g.5gb": "1", "example.com/Custom-NPU": "1",
	}}}}
	tj, errs := NewTrainJob("team", in, field.NewPath("train_job"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	for name, q := range tj.Spec.Trainer.ResourcesPerNode.Limits {
		got = append(got, string(name)+"="+q.String())
	}
	slices.Sort(got)
	want := []string{"cpu=2", "ephemeral-storage=10Gi", "example.com/Custom-NPU=1", "memory=4Gi", "nvidia.com/gpu=1", "nvidia.com/mig-1g.5gb=1"}
	if !slices.Equal(got, want) {
		t.Errorf("limits %q, want %q", got, want)
	}
}

func TestNewTrainJobErrors(t *testing.T) {
	cases := map[string]struct {
		in        *kilnv1.NewTrainJob
		wantField string
		wantText  string
	}{
		"no name":          {in: &kilnv1.NewTrainJob{Spec: &kilnv1.TrainJobSpec{Runtime: "r"}}, wantField: "train_job.name", wantText: "generate_name"},
		"bad name":         {in: &kilnv1.NewTrainJob{Name: "My_Job", Spec: &kilnv1.TrainJobSpec{Runtime: "r"}}, wantField: "train_job.name", wantText: "lower case"},
		"no spec":          {in: &kilnv1.NewTrainJob{Name: "a"}, wantField: "train_job.spec", wantText: "runtime"},
		"no runtime":       {in: &kilnv1.NewTrainJob{Name: "a", Spec: &kilnv1.TrainJobSpec{}}, wantField: "train_job.spec.runtime", wantText: "kiln runtimes list"},
		"negative nodes":   {in: &kilnv1.NewTrainJob{Name: "a", Spec: &kilnv1.TrainJobSpec{Runtime: "r", Nodes: -1}}, wantField: "train_job.spec.nodes", wantText: "at least 1"},
		"bad quantity":     {in: &kilnv1.NewTrainJob{Name: "a", Spec: &kilnv1.TrainJobSpec{Runtime: "r", ResourcesPerNode: &kilnv1.Resources{Requests: map[string]string{"memory": "lots"}}}}, wantField: "train_job.spec.resources_per_node.requests[memory]", wantText: "16Gi"},
		"a resource twice": {in: &kilnv1.NewTrainJob{Name: "a", Spec: &kilnv1.TrainJobSpec{Runtime: "r", ResourcesPerNode: &kilnv1.Resources{Limits: map[string]string{"gpu": "1", "nvidia.com/gpu": "2"}}}}, wantField: "train_job.spec.resources_per_node.limits[nvidia.com/gpu]", wantText: "nvidia.com/gpu is nvidia.com/gpu, already given as gpu: give it once"},
		"bad env name":     {in: &kilnv1.NewTrainJob{Name: "a", Spec: &kilnv1.TrainJobSpec{Runtime: "r", Env: []*kilnv1.EnvVar{{Name: "1X"}}}}, wantField: "train_job.spec.env[0].name", wantText: "environment variable"},
		"zero deadline":    {in: &kilnv1.NewTrainJob{Name: "a", Spec: &kilnv1.TrainJobSpec{Runtime: "r", ActiveDeadlineSeconds: ptr.To[int64](0)}}, wantField: "train_job.spec.active_deadline_seconds", wantText: "at least 1"},
		"negative ttl":     {in: &kilnv1.NewTrainJob{Name: "a", Spec: &kilnv1.TrainJobSpec{Runtime: "r", TtlSecondsAfterFinished: ptr.To[int32](-1)}}, wantField: "train_job.spec.ttl_seconds_after_finished", wantText: "at least 0"},
		"bad queue":        {in: &kilnv1.NewTrainJob{Name: "a", Spec: &kilnv1.TrainJobSpec{Runtime: "r", Queue: "a b"}}, wantField: "train_job.spec.queue", wantText: "alphanumeric"},
		"name and prefix":  {in: &kilnv1.NewTrainJob{Name: "a", GenerateName: "b-", Spec: &kilnv1.TrainJobSpec{Runtime: "r"}}, wantField: "train_job.generate_name", wantText: "not both"},
		"long prefix":      {in: &kilnv1.NewTrainJob{GenerateName: strings.Repeat("a", 60), Spec: &kilnv1.TrainJobSpec{Runtime: "r"}}, wantField: "train_job.generate_name", wantText: "58"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := NewTrainJob("team", tc.in, field.NewPath("train_job"))
			if len(errs) == 0 {
				t.Fatal("NewTrainJob() accepted it")
			}
			if errs[0].Field != tc.wantField || !strings.Contains(errs[0].Error(), tc.wantText) {
				t.Errorf("NewTrainJob() error = %q on %s, want %s mentioning %q", errs[0].Error(), errs[0].Field, tc.wantField, tc.wantText)
			}
		})
	}
}
