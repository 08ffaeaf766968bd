package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func adviceScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, trainer.AddToScheme, kueuev1beta2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}

func gpuClusterQueue(name, cohort, gpus string) *kueuev1beta2.ClusterQueue {
	cq := &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cq.Spec.CohortName = kueuev1beta2.CohortReference(cohort)
	cq.Spec.ResourceGroups = []kueuev1beta2.ResourceGroup{{
		CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
		Flavors:          []kueuev1beta2.FlavorQuotas{{Name: "a100", Resources: []kueuev1beta2.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(gpus)}}}},
	}}
	return cq
}

func localQueue(ns, name, cq string) *kueuev1beta2.LocalQueue {
	return &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(cq)}}
}

// node offers the resources given as name, quantity pairs.
func node(name string, offers ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{}}}
	for i := 0; i+1 < len(offers); i += 2 {
		n.Status.Allocatable[corev1.ResourceName(offers[i])] = resource.MustParse(offers[i+1])
	}
	return n
}

func gpus(n string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}}
}

// What a valid job that can never start is told at creation, as admission warnings.
func TestValidatorAdvice(t *testing.T) {
	withCommand := kilntesting.MakeRuntime("torch-distributed").Command("torchrun")
	claim := corev1.Volume{Name: "checkpoints", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "kiln-checkpoints"}}}
	optional := corev1.Volume{Name: "extra", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "maybe", Optional: ptr.To(true)}}}
	queues := []client.Object{gpuClusterQueue("cluster-queue", "", "32"), localQueue("ns", "default", "cluster-queue"), localQueue("ns", "gpu-a100", "cluster-queue")}
	cases := map[string]struct {
		runtime *kilntesting.RuntimeWrapper
		job     *trainer.TrainJob
		objects []client.Object
		want    []string
	}{
		"a job that fits, in a queue that exists: nothing": {
			runtime: withCommand, objects: queues,
			job: kilntesting.MakeTrainJob("job", "ns").Queue("default").NumNodes(4).ResourcesPerNode(gpus("8")).Obj(),
		},
		"a queue that does not exist: the ones that do, and the nearest": {
			runtime: withCommand, objects: queues,
			job:  kilntesting.MakeTrainJob("job", "ns").Queue("gpu-a10").Obj(),
			want: []string{`LocalQueue "gpu-a10" does not exist in namespace ns (did you mean "gpu-a100"?): the job waits until it is created. Queues there: "default", "gpu-a100"`},
		},
		"more than the ClusterQueue ever admits: the numbers": {
			runtime: withCommand, objects: queues,
			job:  kilntesting.MakeTrainJob("job", "ns").Queue("default").NumNodes(8).ResourcesPerNode(gpus("8")).Obj(),
			want: []string{`this job can never be admitted: it asks for 64 nvidia.com/gpu (at most 32) of its ClusterQueue cluster-queue, which LocalQueue "default" feeds`},
		},
		"a cohort lends: what fits with borrowing is fine": {
			runtime: withCommand,
			objects: []client.Object{gpuClusterQueue("cluster-queue", "pool", "32"), gpuClusterQueue("other", "pool", "32"), localQueue("ns", "default", "cluster-queue")},
			job:     kilntesting.MakeTrainJob("job", "ns").Queue("default").NumNodes(8).ResourcesPerNode(gpus("8")).Obj(),
		},
		"a cohort lends, but not enough": {
			runtime: withCommand,
			objects: []client.Object{gpuClusterQueue("cluster-queue", "pool", "32"), gpuClusterQueue("other", "pool", "16"), localQueue("ns", "default", "cluster-queue")},
			job:     kilntesting.MakeTrainJob("job", "ns").Queue("default").NumNodes(8).ResourcesPerNode(gpus("8")).Obj(),
			want:    []string{`it asks for 64 nvidia.com/gpu (at most 48) of its ClusterQueue cluster-queue (cohort pool included)`},
		},
		"a claim the namespace lacks; an optional Secret is no matter": {
			runtime: kilntesting.MakeRuntime("torch-distributed-spot").Command("torchrun").Volume(claim).Volume(optional),
			job:     kilntesting.MakeTrainJob("job", "ns").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed-spot").Obj(),
			want:    []string{`PersistentVolumeClaim "kiln-checkpoints" does not exist in namespace ns: the job's pods (volume checkpoints of node) will wait for it and not start`},
		},
		"a claim that exists: nothing": {
			runtime: kilntesting.MakeRuntime("torch-distributed-spot").Command("torchrun").Volume(claim),
			objects: []client.Object{&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kiln-checkpoints"}}},
			job:     kilntesting.MakeTrainJob("job", "ns").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed-spot").Obj(),
		},
		"no command anywhere": {
			runtime: kilntesting.MakeRuntime("torch-distributed"),
			job:     kilntesting.MakeTrainJob("job", "ns").Obj(),
			want:    []string{`no command: neither spec.trainer.command nor runtime "torch-distributed" says what to run`},
		},
		"a GPU job on a cluster of CPU nodes": {
			runtime: withCommand, objects: []client.Object{node("cpu-1", "cpu", "16"), node("cpu-2", "cpu", "32", "memory", "64Gi")},
			job:  kilntesting.MakeTrainJob("job", "ns").NumNodes(2).ResourcesPerNode(gpus("8")).Obj(),
			want: []string{`no node offers nvidia.com/gpu, of which each pod of node asks for 8: its pods would stay Pending until a node with it joins. Ask for what the nodes offer ("cpu", "memory"), or add nodes that offer it`},
		},
		"more per pod than the largest node offers": {
			runtime: withCommand, objects: []client.Object{node("gpu-1", "nvidia.com/gpu", "4"), node("gpu-2", "nvidia.com/gpu", "2")},
			job:  kilntesting.MakeTrainJob("job", "ns").ResourcesPerNode(gpus("8")).Obj(),
			want: []string{`each pod of node asks for 8 nvidia.com/gpu, more than any node offers (at most 4)`},
		},
		"a node offers it: nothing": {
			runtime: withCommand, objects: []client.Object{node("cpu-1", "cpu", "16"), node("gpu-1", "nvidia.com/gpu", "8")},
			job: kilntesting.MakeTrainJob("job", "ns").ResourcesPerNode(gpus("8")).Obj(),
		},
		"a queued job: its quota speaks, not the nodes (they may be another cluster's)": {
			runtime: withCommand, objects: append([]client.Object{node("cpu-1", "cpu", "16")}, queues...),
			job: kilntesting.MakeTrainJob("job", "ns").Queue("default").ResourcesPerNode(gpus("8")).Obj(),
		},
		"the job's own command": {
			runtime: kilntesting.MakeRuntime("torch-distributed"),
			job:     kilntesting.MakeTrainJob("job", "ns").Command("python", "train.py").Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			scheme := adviceScheme(t)
			objects := append([]client.Object{tc.runtime.ClusterTrainingRuntime()}, tc.objects...)
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).Build()
			warnings, err := (&Validator{client: c, live: c}).ValidateCreate(context.Background(), tc.job)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if len(warnings) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", warnings, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %q does not say %q", warnings[i], w)
				}
			}
		})
	}
}

// The queues are read from the cache; past it only for one the cache does not have yet.
func TestValidatorAdviceReadsQueuesFromTheCache(t *testing.T) {
	rt := kilntesting.MakeRuntime("torch-distributed").Command("torchrun").ClusterTrainingRuntime()
	queues := []client.Object{gpuClusterQueue("cluster-queue", "", "32"), localQueue("ns", "default", "cluster-queue")}
	job := kilntesting.MakeTrainJob("job", "ns").Queue("default").NumNodes(4).ResourcesPerNode(gpus("8")).Obj()
	scheme := adviceScheme(t)
	counting := func(objects []client.Object, reads *[]string) client.Client {
		return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, isRuntime := obj.(*trainer.ClusterTrainingRuntime); !isRuntime {
					*reads = append(*reads, fmt.Sprintf("%T %s", obj, key))
				}
				return c.Get(ctx, key, obj, opts...)
			},
		}).Build()
	}

	var liveReads []string
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append([]client.Object{rt}, queues...)...).Build()
	warnings, err := (&Validator{client: cache, live: counting([]client.Object{rt}, &liveReads)}).ValidateCreate(context.Background(), job)
	if err != nil || len(warnings) != 0 || len(liveReads) != 0 {
		t.Errorf("queues in the cache: warnings %q (err %v), reads past the cache %q; want none", warnings, err, liveReads)
	}

	// Created a moment before the job: not in the cache yet, no warning.
	liveReads = nil
	cache = fake.NewClientBuilder().WithScheme(scheme).WithObjects(rt).Build()
	warnings, err = (&Validator{client: cache, live: counting(append([]client.Object{rt}, queues...), &liveReads)}).ValidateCreate(context.Background(), job)
	want := []string{"*v1beta2.LocalQueue ns/default", "*v1beta2.ClusterQueue /cluster-queue"}
	if err != nil || len(warnings) != 0 || !slices.Equal(liveReads, want) {
		t.Errorf("queues not cached yet: warnings %q (err %v), reads past the cache %q; want none and %q", warnings, err, liveReads, want)
	}
}

func TestRequests(t *testing.T) {
	rt := kilntesting.MakeRuntime("torch-distributed").Command("torchrun").Spec()
	pod := &rt.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	pod.Containers[0].Resources.Requests = corev1.ResourceList{"cpu": resource.MustParse("2")}
	pod.InitContainers = []corev1.Container{
		{Name: "fetch", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("4")}}},
		{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("1")}}},
	}
	tj := kilntesting.MakeTrainJob("job", "ns").NumNodes(3).Obj()
	res, errs := validateRendering(tj, rt)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := map[string]string{}
	for name, q := range Requests(res.JobSet) {
		got[string(name)] = q.String()
	}
	// Per pod: max(2 + 1 sidecar, 4 init) CPUs and 1 GPU (a limit counts as the request); three pods.
	if diff := cmp.Diff(map[string]string{"cpu": "12", "nvidia.com/gpu": "3"}, got); diff != "" {
		t.Errorf("Requests mismatch (-want +got):\n%s", diff)
	}
}
