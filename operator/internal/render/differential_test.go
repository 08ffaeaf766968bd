package render

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	upstream "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	upstreamcore "github.com/kubeflow/trainer/v2/pkg/runtime/core"
	upstreamtesting "github.com/kubeflow/trainer/v2/pkg/util/testing"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	coscheduling "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"
	volcano "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/kiln-ml/kiln/api/testing/pinned"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/runtimes"
)

// convert moves an object between Kiln's and upstream's types through their shared wire
// format.
func convert[T any](t *testing.T, in any) *T {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// upstreamRender renders tj with Kubeflow Trainer v2.3's own runtime framework.
func upstreamRender(t *testing.T, tj *trainer.TrainJob, rt *trainer.TrainingRuntimeSpec) (*jobsetv1alpha2.JobSet, *corev1.ConfigMap) {
	t.Helper()
	up := upstreamObjects(t, tj, rt)
	return up.jobSet, up.hostfile
}

// upstreamRendering is what upstream's runtime framework renders for a TrainJob.
type upstreamRendering struct {
	jobSet   *jobsetv1alpha2.JobSet
	hostfile *corev1.ConfigMap
	// podGroup is a scheduler-plugins or a Volcano PodGroup, or nil.
	podGroup client.Object
}

// upstreamObjects renders tj with Kubeflow Trainer v2.3's own runtime framework.
func upstreamObjects(t *testing.T, tj *trainer.TrainJob, rt *trainer.TrainingRuntimeSpec) upstreamRendering {
	t.Helper()
	ctx := context.Background()
	urt := &upstream.TrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: upstream.GroupVersion.String(), Kind: upstream.TrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{Name: tj.Spec.RuntimeRef.Name, Namespace: tj.Namespace},
		Spec:       *convert[upstream.TrainingRuntimeSpec](t, rt),
	}
	builder := upstreamtesting.NewClientBuilder().WithObjects(urt)
	c := builder.Build()
	fw, err := upstreamcore.NewTrainingRuntime(ctx, c, upstreamtesting.AsIndex(builder), nil)
	if err != nil {
		t.Fatal(err)
	}
	utj := convert[upstream.TrainJob](t, tj)
	objs, err := fw.NewObjects(ctx, utj)
	if err != nil {
		t.Fatalf("upstream NewObjects: %v", err)
	}
	typed, err := upstreamtesting.ToObject(c.Scheme(), objs...)
	if err != nil {
		t.Fatal(err)
	}
	var out upstreamRendering
	for _, o := range typed {
		switch v := o.(type) {
		case *jobsetv1alpha2.JobSet:
			out.jobSet = v
		case *corev1.ConfigMap:
			if v.Name == HostfileName(tj) {
				out.hostfile = v
			}
		case *coscheduling.PodGroup, *volcano.PodGroup:
			out.podGroup = v.(client.Object)
		case *corev1.Secret: // MPI's SSH key: random, Kiln's own tests cover it
		default:
			t.Fatalf("upstream rendered a %T, unknown to this test", o)
		}
	}
	if out.jobSet == nil {
		t.Fatal("upstream rendered no JobSet")
	}
	return out
}

// differentialCase is one TrainJob of the matrix.
type differentialCase struct {
	nodes     *int32
	procs     *int32
	resources *corev1.ResourceRequirements
	patch     bool
}

func (c differentialCase) String() string {
	res := "runtime-resources"
	if c.resources != nil {
		res = fmt.Sprint(len(c.resources.Requests), "-requests")
		if _, ok := c.resources.Requests["nvidia.com/gpu"]; ok {
			res = "gpus"
		}
	}
	return fmt.Sprintf("nodes=%v/procs=%v/%s/patch=%v", ptr.Deref(c.nodes, 0), ptr.Deref(c.procs, 0), res, c.patch)
}

func differentialMatrix() []differentialCase {
	gpus := &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi"), "nvidia.com/gpu": resource.MustParse("4")},
		Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")},
	}
	cpus := &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}
	var out []differentialCase
	for _, nodes := range []*int32{nil, ptr.To[int32](1), ptr.To[int32](4)} {
		for _, procs := range []*int32{nil, ptr.To[int32](2)} {
			for _, res := range []*corev1.ResourceRequirements{nil, gpus, cpus} {
				for _, patch := range []bool{false, true} {
					out = append(out, differentialCase{nodes: nodes, procs: procs, resources: res, patch: patch})
				}
			}
		}
	}
	return out
}

// kueuePatch is what Kueue writes on admission.
func kueuePatch() trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: trainer.KueueManager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
			Template: &trainer.PodTemplatePatch{
				Metadata: &metav1.ObjectMeta{Labels: map[string]string{"kueue.x-k8s.io/podset": "node"}, Annotations: map[string]string{"kueue.x-k8s.io/workload": "w"}},
				Spec: &trainer.PodSpecPatch{
					NodeSelector:    map[string]string{"kiln.dev/node-pool": "gpu"},
					Tolerations:     []corev1.Toleration{{Key: "cloud.google.com/gke-spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
					SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}},
				},
			},
		}}}}},
	}}}
}

// kueueView is what Kueue computes quota from: per replicated job, its pod count and one
// pod's requests.
func kueueView(js *jobsetv1alpha2.JobSet) map[string]string {
	out := map[string]string{}
	for _, rj := range js.Spec.ReplicatedJobs {
		req := corev1.ResourceList{}
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			for n, q := range c.Resources.Requests {
				sum := req[n]
				sum.Add(q)
				req[n] = sum
			}
		}
		var names []string
		for n, q := range req {
			names = append(names, fmt.Sprintf("%s=%s", n, q.String()))
		}
		sort.Strings(names)
		out[rj.Name] = fmt.Sprintf("replicas=%d parallelism=%d completions=%d requests=%v",
			rj.Replicas, ptr.Deref(rj.Template.Spec.Parallelism, -1), ptr.Deref(rj.Template.Spec.Completions, -1), names)
	}
	return out
}

// TestRenderMatchesUpstream renders every catalog runtime with a matrix of TrainJobs through
// Kiln and through Kubeflow Trainer v2.3's runtime framework, and requires the same JobSet.
func TestRenderMatchesUpstream(t *testing.T) {
	rts, err := runtimes.ClusterTrainingRuntimes()
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range rts {
		for _, tc := range differentialMatrix() {
			t.Run(rt.Name+"/"+tc.String(), func(t *testing.T) {
				tj := &trainer.TrainJob{
					TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
					ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "uid-1"},
					Spec: trainer.TrainJobSpec{
						RuntimeRef: trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)},
						Trainer: &trainer.Trainer{
							Image: ptr.To("example.com/train:1"), Command: []string{"python", "train.py"}, Args: []string{"--epochs", "3"},
							Env: []corev1.EnvVar{{Name: "LR", Value: "0.01"}}, NumNodes: tc.nodes, NumProcPerNode: tc.procs, ResourcesPerNode: tc.resources,
						},
						Suspend: ptr.To(tc.patch),
					},
				}
				if tc.patch {
					tj.Spec.RuntimePatches = []trainer.RuntimePatch{kueuePatch()}
				}
				spec := withCRDDefaults(rt.Spec.DeepCopy())
				want, wantHostfile := upstreamRender(t, tj, spec)
				got, err := Render(tj, spec)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(kueueView(want), kueueView(got.JobSet)); diff != "" {
					t.Errorf("Kueue's view (counts and requests) differs from upstream (-upstream +kiln):\n%s", diff)
				}
				if rt.Spec.MLPolicy.XGBoost != nil {
					// Upstream runs its XGBoost and PlainML plugins in map order, so whether
					// the user's env comes before or after DMLC_* changes from run to run;
					// Kiln always writes DMLC_* first. Compare the variables, not their order.
					sortEnv(want)
					sortEnv(got.JobSet)
				}
				if diff := cmp.Diff(want.Spec, got.JobSet.Spec); diff != "" {
					t.Errorf("JobSet spec differs from upstream (-upstream +kiln):\n%s", diff)
				}
				if diff := cmp.Diff(want.Labels, got.JobSet.Labels); diff != "" {
					t.Errorf("JobSet labels differ from upstream (-upstream +kiln):\n%s", diff)
				}
				if wantHostfile != nil || got.HostfileConfigMap != nil {
					if wantHostfile == nil || got.HostfileConfigMap == nil {
						t.Fatalf("hostfile: upstream %v, kiln %v", wantHostfile != nil, got.HostfileConfigMap != nil)
					}
					if diff := cmp.Diff(wantHostfile.Data, got.HostfileConfigMap.Data); diff != "" {
						t.Errorf("MPI hostfile differs from upstream (-upstream +kiln):\n%s", diff)
					}
				}
			})
		}
	}
}

// withCRDDefaults applies the CRD defaults the API server gives a runtime before either
// controller sees it.
func withCRDDefaults(spec *trainer.TrainingRuntimeSpec) *trainer.TrainingRuntimeSpec {
	if m := spec.MLPolicy.MPI; m != nil {
		m.NumProcPerNode = ptr.To(ptr.Deref(m.NumProcPerNode, 1))
		m.MPIImplementation = ptr.To(ptr.Deref(m.MPIImplementation, trainer.MPIImplementationOpenMPI))
		m.SSHAuthMountPath = ptr.To(ptr.Deref(m.SSHAuthMountPath, "/root/.ssh"))
		m.RunLauncherAsNode = ptr.To(ptr.Deref(m.RunLauncherAsNode, false))
	}
	for i := range spec.Template.Spec.ReplicatedJobs {
		spec.Template.Spec.ReplicatedJobs[i].Replicas = max(spec.Template.Spec.ReplicatedJobs[i].Replicas, 1)
	}
	return spec
}

func sortEnv(js *jobsetv1alpha2.JobSet) {
	for i := range js.Spec.ReplicatedJobs {
		cs := js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.Containers
		for j := range cs {
			sort.Slice(cs[j].Env, func(a, b int) bool { return cs[j].Env[a].Name < cs[j].Env[b].Name })
		}
	}
}

// TestRenderInitializersMatchUpstream covers runtimes with dataset and model initializers.
func TestRenderInitializersMatchUpstream(t *testing.T) {
	rts, err := runtimes.ClusterTrainingRuntimes()
	if err != nil {
		t.Fatal(err)
	}
	var torch *trainer.TrainingRuntimeSpec
	for _, rt := range rts {
		if rt.Name == "torch-distributed" {
			torch = rt.Spec.DeepCopy()
		}
	}
	initJob := func(name string) jobsetv1alpha2.ReplicatedJob {
		rj := jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: 1}
		rj.Template.Labels = map[string]string{trainer.LabelTrainJobAncestor: name}
		rj.Template.Spec.Template.Spec.Containers = []corev1.Container{{
			Name: name, Image: "example.com/" + name + ":1",
			Env:          []corev1.EnvVar{{Name: "STORAGE_URI", Value: "hf://default"}},
			VolumeMounts: []corev1.VolumeMount{{Name: "initializer", MountPath: "/workspace"}},
		}}
		return rj
	}
	torch.Template.Spec.ReplicatedJobs = append([]jobsetv1alpha2.ReplicatedJob{initJob("dataset-initializer"), initJob("model-initializer")}, torch.Template.Spec.ReplicatedJobs...)
	cases := map[string]*trainer.Initializer{
		"none":         nil,
		"dataset":      {Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://tatsu-lab/alpaca")}},
		"model":        {Model: &trainer.ModelInitializer{StorageUri: ptr.To("s3://bucket/model"), Env: []corev1.EnvVar{{Name: "REVISION", Value: "main"}}}},
		"both, secret": {Dataset: &trainer.DatasetInitializer{SecretRef: &corev1.LocalObjectReference{Name: "hf"}, Env: []corev1.EnvVar{{Name: "STORAGE_URI", Value: "hf://x"}}}, Model: &trainer.ModelInitializer{StorageUri: ptr.To("")}},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "uid-1"},
				Spec: trainer.TrainJobSpec{
					RuntimeRef:  trainer.RuntimeRef{Name: "with-init", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)},
					Initializer: in,
					Trainer:     &trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"torchrun", "train.py"}},
				},
			}
			want, _ := upstreamRender(t, tj, torch)
			got, err := Render(tj, torch)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Spec, got.JobSet.Spec); diff != "" {
				t.Errorf("JobSet spec differs from upstream (-upstream +kiln):\n%s", diff)
			}
		})
	}
}

// upstreamModuleDir is the pinned Kubeflow Trainer module (tools/trainer). This test also
// imports upstream's packages, at the version operator/go.mod requires:
// TestUpstreamPinnedOnce keeps the two the same.
func upstreamModuleDir(t *testing.T) string {
	t.Helper()
	dir, err := pinned.ModuleDir("trainer", "github.com/kubeflow/trainer/v2")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUpstreamPinnedOnce fails when operator/go.mod (whose upstream packages this test
// renders with) and tools/trainer (the upstream the platform and make bench run) disagree.
func TestUpstreamPinnedOnce(t *testing.T) {
	want, err := pinned.ModuleVersion("trainer", "github.com/kubeflow/trainer/v2")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pinned.Requirement(filepath.Join("..", "..", "go.mod"), "github.com/kubeflow/trainer/v2")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("operator/go.mod requires Kubeflow Trainer %s, tools/trainer pins %s: make them the same", got, want)
	}
}

func decodeFile(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, doc := range strings.Split(string(data), "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// TestUpstreamExamplesRenderIdentically renders Kubeflow Trainer v2.3's example TrainJobs
// with its own runtimes, through Kiln and through upstream.
func TestUpstreamExamplesRenderIdentically(t *testing.T) {
	up := upstreamModuleDir(t)
	runtimesByName := map[string]*trainer.TrainingRuntimeSpec{}
	files, _ := filepath.Glob(filepath.Join(up, "manifests", "base", "runtimes", "*.yaml"))
	examples, _ := filepath.Glob(filepath.Join(up, "examples", "yaml", "*.yaml"))
	for _, f := range append(files, examples...) {
		for _, doc := range decodeFile(t, f) {
			if doc["kind"] == trainer.ClusterTrainingRuntimeKind || doc["kind"] == trainer.TrainingRuntimeKind {
				rt := convert[trainer.TrainingRuntime](t, doc)
				runtimesByName[rt.Name] = &rt.Spec
			}
		}
	}
	rendered := 0
	for _, f := range examples {
		for _, doc := range decodeFile(t, f) {
			if doc["kind"] != trainer.TrainJobKind {
				continue
			}
			tj := convert[trainer.TrainJob](t, doc)
			tj.UID = "uid-1"
			if tj.Namespace == "" {
				tj.Namespace = "default"
			}
			name := filepath.Base(f)
			t.Run(name, func(t *testing.T) {
				rt, ok := runtimesByName[tj.Spec.RuntimeRef.Name]
				if !ok {
					t.Fatalf("no upstream runtime %s", tj.Spec.RuntimeRef.Name)
				}
				tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
				up := upstreamObjects(t, tj, rt)
				want := up.jobSet
				got, err := Render(tj, rt)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(up.podGroup, got.PodGroup); diff != "" {
					t.Errorf("PodGroup differs from upstream (-upstream +kiln):\n%s", diff)
				}
				if diff := cmp.Diff(want.Spec, got.JobSet.Spec); diff != "" {
					t.Errorf("JobSet spec differs from upstream (-upstream +kiln):\n%s", diff)
				}
				if diff := cmp.Diff(want.Labels, got.JobSet.Labels); diff != "" {
					t.Errorf("JobSet labels differ from upstream (-upstream +kiln):\n%s", diff)
				}
				if diff := cmp.Diff(want.Annotations, got.JobSet.Annotations); diff != "" {
					t.Errorf("JobSet annotations differ from upstream (-upstream +kiln):\n%s", diff)
				}
				rendered++
			})
		}
	}
	if rendered < 4 {
		t.Errorf("only %d upstream examples rendered", rendered)
	}
	t.Logf("%d upstream examples render identically", rendered)
}

// TestPodGroupsMatchUpstream renders every catalog runtime with each gang-scheduling policy
// through Kiln and through upstream, and requires the same PodGroup and the same pods
// (which name it), initializers counted.
func TestPodGroupsMatchUpstream(t *testing.T) {
	rts, err := runtimes.ClusterTrainingRuntimes()
	if err != nil {
		t.Fatal(err)
	}
	policies := map[string]func(*trainer.TrainingRuntimeSpec){
		"coscheduling": func(s *trainer.TrainingRuntimeSpec) {
			s.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{
				Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](30)}}}
		},
		"volcano": func(s *trainer.TrainingRuntimeSpec) {
			s.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{
				Volcano: &trainer.VolcanoPodGroupPolicySource{NetworkTopology: &trainer.NetworkTopologySpec{Mode: "soft", HighestTierAllowed: ptr.To(2)}}}}
			s.Template.Annotations = overlay(s.Template.Annotations, map[string]string{volcano.QueueNameAnnotationKey: "research"})
			for i := range s.Template.Spec.ReplicatedJobs {
				s.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.PriorityClassName = "train-" + s.Template.Spec.ReplicatedJobs[i].Name
			}
		},
		"volcano, defaults": func(s *trainer.TrainingRuntimeSpec) {
			s.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{Volcano: &trainer.VolcanoPodGroupPolicySource{}}}
		},
	}
	gpus := &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), "nvidia.com/gpu": resource.MustParse("4")},
		Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")},
	}
	checked := 0
	for _, rt := range rts {
		for policyName, policy := range policies {
			for _, nodes := range []*int32{nil, ptr.To[int32](4)} {
				for _, suspended := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/nodes=%d/suspended=%v", rt.Name, policyName, ptr.Deref(nodes, 0), suspended)
					t.Run(name, func(t *testing.T) {
						spec := withCRDDefaults(rt.Spec.DeepCopy())
						policy(spec)
						tj := &trainer.TrainJob{
							TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
							ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "uid-1"},
							Spec: trainer.TrainJobSpec{
								RuntimeRef: trainer.RuntimeRef{Name: rt.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)},
								Trainer:    &trainer.Trainer{NumNodes: nodes, ResourcesPerNode: gpus},
								Suspend:    ptr.To(suspended),
							},
						}
						if suspended {
							tj.Spec.RuntimePatches = []trainer.RuntimePatch{kueuePatch()}
						}
						want := upstreamObjects(t, tj, spec)
						got, err := Render(tj, spec)
						if err != nil {
							t.Fatal(err)
						}
						if want.podGroup == nil || got.PodGroup == nil {
							t.Fatalf("PodGroup: upstream rendered %v, kiln %v", want.podGroup, got.PodGroup)
						}
						if diff := cmp.Diff(want.podGroup, got.PodGroup); diff != "" {
							t.Errorf("PodGroup differs from upstream (-upstream +kiln):\n%s", diff)
						}
						if diff := cmp.Diff(want.jobSet.Spec, got.JobSet.Spec); diff != "" {
							t.Errorf("JobSet spec differs from upstream (-upstream +kiln):\n%s", diff)
						}
						checked++
					})
				}
			}
		}
	}
	if checked < 12 {
		t.Errorf("only %d renderings compared", checked)
	}
}
