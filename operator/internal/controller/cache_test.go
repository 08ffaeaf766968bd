package controller

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestKeepSuspendOwners(t *testing.T) {
	at := metav1.Now()
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:suspend":{},"f:trainer":{"f:image":{}}}}`)},
		{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:trainer":{"f:image":{}}}}`)},
		{Manager: "kiln", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at, Subresource: "status",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{}}}`)},
	}}}
	if _, err := keepSuspendOwners(tj); err != nil {
		t.Fatal(err)
	}
	if len(tj.ManagedFields) != 1 || tj.ManagedFields[0].Manager != "kubectl" || !tj.ManagedFields[0].Time.Equal(&at) {
		t.Fatalf("kept %+v, want only kubectl's entry with its time", tj.ManagedFields)
	}
	if !OwnsSuspend(tj.ManagedFields[0].FieldsV1.GetRawBytes()) || string(tj.ManagedFields[0].FieldsV1.GetRawBytes()) != `{"f:spec":{"f:suspend":{}}}` {
		t.Fatalf("kept fields %s, want spec.suspend only", tj.ManagedFields[0].FieldsV1.GetRawBytes())
	}
	// What a resume is timed from is unchanged by the transform.
	tj.Spec.Suspend = ptr.To(false)
	if got := UnsuspendedAt(tj, at.Add(1)); got == nil || !got.Equal(at.Time) {
		t.Fatalf("unsuspendedAt = %v, want %v", got, at.Time)
	}
}

func TestStripReplicatedJobs(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kiln"}}},
		Spec: jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(true), ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
			Name: "node", Replicas: 2,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "img"}}}}}},
		}}},
		Status: jobsetv1alpha2.JobSetStatus{ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Active: 2}}},
	}
	opts := CacheOptions()
	var transform func(any) (any, error)
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*jobsetv1alpha2.JobSet); ok {
			transform = by.Transform
		}
	}
	if _, err := transform(js); err != nil {
		t.Fatal(err)
	}
	if js.ManagedFields != nil || js.Spec.ReplicatedJobs != nil {
		t.Fatalf("managedFields or replicated jobs kept: %+v", js)
	}
	if !*js.Spec.Suspend || js.Status.ReplicatedJobsStatus[0].Active != 2 {
		t.Fatalf("what the controller reads was lost: %+v", js)
	}
}

func TestNoConfigMapsCached(t *testing.T) {
	for obj := range CacheOptions().ByObject {
		if _, ok := obj.(*corev1.ConfigMap); ok {
			t.Fatal("the cache holds ConfigMaps")
		}
	}
	disabled := false
	for _, obj := range ClientOptions().Cache.DisableFor {
		_, ok := obj.(*corev1.ConfigMap)
		disabled = disabled || ok
	}
	if !disabled {
		t.Fatal("a ConfigMap read through the manager's client would start an informer of every ConfigMap")
	}
}

// The strings every cached TrainJob and JobSet repeats are stored once; what each is, is unchanged.
func TestInternedStrings(t *testing.T) {
	fresh := func(s string) string { return string([]byte(s)) }
	cond := func() metav1.Condition {
		return metav1.Condition{Type: fresh("Complete"), Status: metav1.ConditionStatus(fresh("True")), Reason: fresh("AllJobsCompleted"), Message: fresh("done")}
	}
	job := func() *trainer.TrainJob {
		return &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: fresh("team"), Name: "a"},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: fresh("torch"), Kind: ptr.To(fresh(trainer.ClusterTrainingRuntimeKind))},
				Trainer: &trainer.Trainer{Image: ptr.To(fresh("img:1"))}},
			Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond()}, JobsStatus: []trainer.JobStatus{{Name: fresh("node")}}},
		}
	}
	jobSet := func() *jobsetv1alpha2.JobSet {
		return &jobsetv1alpha2.JobSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: fresh("team"), OwnerReferences: []metav1.OwnerReference{{APIVersion: fresh("trainer.kubeflow.org/v1alpha1"), Kind: fresh("TrainJob"), Name: "a"}}},
			Status: jobsetv1alpha2.JobSetStatus{Conditions: []metav1.Condition{cond()}, TerminalState: fresh("Completed"),
				ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: fresh("node")}}},
		}
	}
	opts := CacheOptions()
	transform := func(obj any) any {
		t.Helper()
		for kind, by := range opts.ByObject {
			if fmt.Sprintf("%T", kind) == fmt.Sprintf("%T", obj) {
				out, err := by.Transform(obj)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
		}
		t.Fatalf("no transform for %T", obj)
		return nil
	}
	same := func(what, a, b string) {
		t.Helper()
		if a != b || unsafe.StringData(a) != unsafe.StringData(b) {
			t.Errorf("%s: %q and %q stored twice", what, a, b)
		}
	}
	a, b := transform(job()).(*trainer.TrainJob), transform(job()).(*trainer.TrainJob)
	same("namespace", a.Namespace, b.Namespace)
	same("runtime", a.Spec.RuntimeRef.Name, b.Spec.RuntimeRef.Name)
	same("runtime kind", *a.Spec.RuntimeRef.Kind, *b.Spec.RuntimeRef.Kind)
	same("image", *a.Spec.Trainer.Image, *b.Spec.Trainer.Image)
	same("condition reason", a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason)
	same("replicated job", a.Status.JobsStatus[0].Name, b.Status.JobsStatus[0].Name)
	if !reflect.DeepEqual(a, job()) {
		t.Fatalf("the TrainJob changed: %+v", a)
	}
	x, y := transform(jobSet()).(*jobsetv1alpha2.JobSet), transform(jobSet()).(*jobsetv1alpha2.JobSet)
	same("owner kind", x.OwnerReferences[0].Kind, y.OwnerReferences[0].Kind)
	same("owner API version", x.OwnerReferences[0].APIVersion, y.OwnerReferences[0].APIVersion)
	same("terminal state", x.Status.TerminalState, y.Status.TerminalState)
	same("condition type", x.Status.Conditions[0].Type, y.Status.Conditions[0].Type)
	if !reflect.DeepEqual(x, jobSet()) {
		t.Fatalf("the JobSet changed: %+v", x)
	}
}

func TestNodesKeepWhatTheyOffer(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"zone": "a"}, Annotations: map[string]string{"big": "x"}},
		Spec:       corev1.NodeSpec{PodCIDR: "100.64.0.0/24"},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Images:      []corev1.ContainerImage{{Names: []string{"a-large-image"}, SizeBytes: 1 << 30}},
		},
	}
	var transform func(any) (any, error)
	for obj, by := range CacheOptions().ByObject {
		if _, ok := obj.(*corev1.Node); ok {
			transform = by.Transform
		}
	}
	got, err := transform(n)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: "u1", ResourceVersion: "7"},
		Status:     corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cached node %+v, want %+v", got, want)
	}
}
