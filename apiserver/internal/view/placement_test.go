package view

import (
	"bytes"
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

const (
	labelBlock = "cloud.google.com/gce-topology-block"
	labelRack  = "cloud.google.com/gce-topology-subblock"
	labelHost  = "kubernetes.io/hostname"
)

var tasLevels = []kueue.Level{{Name: "block", NodeLabel: labelBlock}, {Name: "rack", NodeLabel: labelRack}, {Name: "host", NodeLabel: labelHost}}

// tasWorkload is a Workload of pod sets node (4, rack required) and launcher (1, no
// topology), admitted on flavor gpu-tas with the hostnames Kueue assigns, or pending with
// message.
func tasWorkload(t *testing.T, admitted bool, message string) *unstructured.Unstructured {
	wl := &kueuev1beta2.Workload{
		TypeMeta:   metav1.TypeMeta{APIVersion: kueue.GroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{Name: "trainjob-rack-1a2b3", Namespace: "team"},
		Spec: kueuev1beta2.WorkloadSpec{QueueName: "tas", PodSets: []kueuev1beta2.PodSet{
			{Name: "launcher", Count: 1},
			{Name: "node", Count: 4, TopologyRequest: &kueuev1beta2.PodSetTopologyRequest{Required: ptr.To(labelRack)}},
		}},
	}
	if admitted {
		wl.Status.Admission = &kueuev1beta2.Admission{ClusterQueue: "tas-queue", PodSetAssignments: []kueuev1beta2.PodSetAssignment{
			{Name: "launcher", Count: ptr.To[int32](1), Flavors: map[corev1.ResourceName]kueuev1beta2.ResourceFlavorReference{"cpu": "default"}},
			{Name: "node", Count: ptr.To[int32](4), Flavors: map[corev1.ResourceName]kueuev1beta2.ResourceFlavorReference{"cpu": "gpu-tas", "nvidia.com/gpu": "gpu-tas"},
				TopologyAssignment: &kueuev1beta2.TopologyAssignment{Levels: []string{labelHost}, Slices: []kueuev1beta2.TopologyAssignmentSlice{{
					DomainCount: 3,
					ValuesPerLevel: []kueuev1beta2.TopologyAssignmentSliceLevelValues{{Individual: &kueuev1beta2.TopologyAssignmentSliceLevelIndividualValues{
						Prefix: ptr.To("kwok-tas-b0-r1-"), Roots: []string{"0", "1", "2"}}}},
					PodCounts: kueuev1beta2.TopologyAssignmentSlicePodCounts{Individual: []int32{2, 1, 1}},
				}}}},
		}}
		wl.Status.Conditions = []metav1.Condition{{Type: kueuev1beta2.WorkloadQuotaReserved, Status: metav1.ConditionTrue}, {Type: kueuev1beta2.WorkloadAdmitted, Status: metav1.ConditionTrue}}
	} else {
		wl.Status.Conditions = []metav1.Condition{{Type: kueuev1beta2.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: message}}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(wl)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func TestPlacement(t *testing.T) {
	wl := WorkloadFrom(tasWorkload(t, true, ""))
	if len(wl.PodSets) != 1 || wl.PodSets[0].Name != "node" || wl.PodSets[0].Flavor != "gpu-tas" || wl.PodSets[0].Required != labelRack {
		t.Fatalf("pod sets = %+v, want node only (launcher asks for no topology), flavor gpu-tas, rack required", wl.PodSets)
	}
	nodes := map[string]map[string]string{
		"kwok-tas-b0-r1-0": {labelBlock: "b0", labelRack: "b0-r1"},
		"kwok-tas-b0-r1-1": {labelBlock: "b0", labelRack: "b0-r1"},
	}
	got := Placement("default", tasLevels, wl.PodSets, func(n string) map[string]string { return nodes[n] })
	want := `{"topology":"default","levels":[{"name":"block","nodeLabel":"cloud.google.com/gce-topology-block"},{"name":"rack","nodeLabel":"cloud.google.com/gce-topology-subblock"},{"name":"host","nodeLabel":"kubernetes.io/hostname"}],` +
		`"podSets":[{"name":"node","count":4,"flavor":"gpu-tas","requiredLevel":"rack","domains":[{"values":["b0","b0-r1","kwok-tas-b0-r1-0"],"pods":2},{"values":["b0","b0-r1","kwok-tas-b0-r1-1"],"pods":1},{"values":["","","kwok-tas-b0-r1-2"],"pods":1}]}]}`
	if s := compactJSON(t, got); s != want {
		t.Errorf("Placement =\n%s\nwant\n%s", s, want)
	}

	if pending := WorkloadFrom(tasWorkload(t, false, "x")); Placement("default", tasLevels, pending.PodSets, nil) != nil {
		t.Error("a pending workload has a placement")
	}
}

func TestWaitingForATopology(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "rack", Namespace: "team", Labels: map[string]string{trainer.KueueQueueNameLabel: "tas"}}}
	tj.Spec.Suspend = ptr.To(true)
	for _, tc := range []struct{ name, message, want string }{{
		name:    "no rack has room",
		message: `couldn't assign flavors to pod set node: topology "default" allows to fit only 3 out of 4 pod(s)`,
		want:    `no rack has room for all 4 pods of node (it requires one rack, node label cloud.google.com/gce-topology-subblock); Kueue: couldn't assign flavors to pod set node: topology "default" allows to fit only 3 out of 4 pod(s)`,
	}, {
		name:    "the quota, not the topology: Kueue's words",
		message: "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu-tas, 8 more needed",
		want:    "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu-tas, 8 more needed",
	}, {
		name:    "another pod set's topology",
		message: `couldn't assign flavors to pod set launcher: insufficient quota; couldn't assign flavors to pod set other: topology "default" doesn't allow to fit any of 4 pod(s)`,
		want:    `couldn't assign flavors to pod set launcher: insufficient quota; couldn't assign flavors to pod set other: topology "default" doesn't allow to fit any of 4 pod(s)`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			wl := WorkloadFrom(tasWorkload(t, false, tc.message))
			wl.Levels = tasLevels
			if _, _, msg := State(tj, wl); msg != tc.want {
				t.Errorf("message =\n%s\nwant\n%s", msg, tc.want)
			}
		})
	}
}

func TestTopologyOf(t *testing.T) {
	tj := &trainer.TrainJob{}
	if got := TopologyOf(tj, tasLevels); got != nil {
		t.Errorf("a job without patches asks for %v", got)
	}
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{
		topologyPatch("example.com/a", kueue.AnnotationPreferredTopology, labelBlock),
		topologyPatch("example.com/b", kueue.AnnotationRequiredTopology, labelRack),
	}
	if got, want := TopologyOf(tj, tasLevels), (&kilnv1.TopologyRequest{Level: "rack", NodeLabel: labelRack}); got.String() != want.String() {
		t.Errorf("TopologyOf = %v, want %v (the last patch wins)", got, want)
	}
	tj.Spec.RuntimePatches = tj.Spec.RuntimePatches[:1]
	if got, want := TopologyOf(tj, nil), (&kilnv1.TopologyRequest{Level: "block", NodeLabel: labelBlock, Preferred: true}); got.String() != want.String() {
		t.Errorf("TopologyOf = %v, want %v (named without the Topology: a label Kiln knows)", got, want)
	}
}

func topologyPatch(manager, annotation, label string) trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
			Template: &trainer.PodTemplatePatch{Metadata: &metav1.ObjectMeta{Annotations: map[string]string{annotation: label}}},
		}}}}},
	}}}
}

// compactJSON is m as protojson writes it, compacted (protojson varies its spacing).
func compactJSON(t *testing.T, m *kilnv1.Placement) string {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestRuntimeTopology(t *testing.T) {
	spec := &trainer.TrainingRuntimeSpec{}
	rj := jobsetv1alpha2.ReplicatedJob{Name: "node"}
	rj.Template.Labels = map[string]string{trainer.LabelTrainJobAncestor: trainer.AncestorTrainer}
	rj.Template.Spec.Template.Annotations = map[string]string{kueue.AnnotationPreferredTopology: labelRack}
	spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{rj}
	got := Runtime(&metav1.ObjectMeta{Name: "torch-distributed-rack"}, trainer.ClusterTrainingRuntimeKind, spec).GetTopology()
	if want := (&kilnv1.TopologyRequest{Level: "rack", NodeLabel: labelRack, Preferred: true}); got.String() != want.String() {
		t.Errorf("runtime topology = %v, want %v", got, want)
	}
}
