package controller

import (
	"context"
	"errors"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/render"
)

func TestSnapshotSpecs(t *testing.T) {
	job := func(name, uid string) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	}
	snapshotOf := func(tj *trainer.TrainJob, deadline int64) *corev1.ConfigMap {
		data, err := yaml.Marshal(&trainer.RuntimeSnapshot{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch",
			Spec: trainer.TrainingRuntimeSpec{RunPolicy: &trainer.RunPolicy{ActiveDeadlineSeconds: ptr.To(deadline)}}})
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: snapshotName(tj), OwnerReferences: []metav1.OwnerReference{render.OwnerReference(tj)}},
			Data:       map[string]string{trainer.RuntimeSnapshotKey: string(data)},
		}
	}
	var s snapshotSpecs
	a, b := job("a", "ua"), job("b", "ub")
	if _, ok := s.get(a); ok {
		t.Fatal("nothing decoded yet")
	}
	specA, err := s.decode(a, snapshotOf(a, 60))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.decode(b, snapshotOf(b, 60)); err != nil {
		t.Fatal(err)
	}
	if s.byJob[client.ObjectKeyFromObject(a)].spec != s.byJob[client.ObjectKeyFromObject(b)].spec {
		t.Fatal("two jobs with equal snapshots hold two decoded copies")
	}
	got, ok := s.get(a)
	if !ok || *got.RunPolicy.ActiveDeadlineSeconds != 60 || *specA.RunPolicy.ActiveDeadlineSeconds != 60 {
		t.Fatalf("get = %v, %v", got, ok)
	}
	*got.RunPolicy.ActiveDeadlineSeconds = 1 // a caller's change stays its own
	if again, _ := s.get(b); *again.RunPolicy.ActiveDeadlineSeconds != 60 {
		t.Fatal("a caller's change reached another job's snapshot")
	}
	if _, ok := s.get(job("a", "other")); ok {
		t.Fatal("a new TrainJob of the same name got the deleted one's snapshot")
	}
	if _, err := s.decode(a, snapshotOf(b, 60)); err == nil {
		t.Fatal("a ConfigMap owned by another TrainJob was accepted as this one's snapshot")
	}
	c := job("c", "uc")
	bad := snapshotOf(c, 60)
	bad.Data[trainer.RuntimeSnapshotKey] = "kind: x\nunknownField: 1\n"
	if _, err := s.decode(c, bad); err == nil {
		t.Fatal("a snapshot with unknown fields decoded")
	}
	s.forget(client.ObjectKeyFromObject(a))
	if _, ok := s.get(a); ok {
		t.Fatal("forgotten, yet found")
	}
}

// After a restart the jobs' snapshots come from one list (in pages), not a read per job,
// and a job pinned before the restart keeps its snapshot though its runtime changed since.
func TestPinnedRuntimeAfterARestart(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	job := func(name string) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name)},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch"}}}
	}
	spec := func(deadline int64) trainer.TrainingRuntimeSpec {
		return trainer.TrainingRuntimeSpec{RunPolicy: &trainer.RunPolicy{ActiveDeadlineSeconds: ptr.To(deadline)}}
	}
	snapshot := func(name string, owner *trainer.TrainJob, deadline int64) *corev1.ConfigMap {
		data, err := yaml.Marshal(&trainer.RuntimeSnapshot{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch", Spec: spec(deadline)})
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{trainer.LabelRuntimeSnapshot: "true"},
				OwnerReferences: []metav1.OwnerReference{render.OwnerReference(owner)}},
			Data: map[string]string{trainer.RuntimeSnapshotKey: string(data)},
		}
	}
	a, b, c, d, fresh := job("a"), job("b"), job("c"), job("d"), job("fresh")
	objs := []client.Object{
		// The runtime as it is now: edited since a, b and c were pinned to a deadline of 60 s.
		&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}, Spec: spec(600)},
		snapshot(snapshotName(a), a, 60), snapshot(snapshotName(b), b, 60), snapshot(snapshotName(c), c, 60),
		// Labelled and owned by d, but not under d's snapshot name: not d's snapshot.
		snapshot("elsewhere", d, 60),
	}
	var lists, pages, gets int
	base := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	c2 := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				gets++
			}
			return cl.Get(ctx, key, obj, opts...)
		},
		// Two snapshots a page, whatever the limit asked: the load must follow the pages.
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			cms, ok := list.(*corev1.ConfigMapList)
			if !ok {
				return cl.List(ctx, list, opts...)
			}
			o := (&client.ListOptions{}).ApplyOptions(opts)
			if o.Continue == "" {
				lists++
			}
			pages++
			if err := cl.List(ctx, cms, opts...); err != nil {
				return err
			}
			from, _ := strconv.Atoi(o.Continue)
			all := len(cms.Items)
			to := min(from+2, all)
			cms.Items, cms.Continue = cms.Items[from:to], ""
			if to < all {
				cms.Continue = strconv.Itoa(to)
			}
			return nil
		},
	})
	r := NewTrainJobReconciler(c2, c2, events.NewFakeRecorder(10), clocktesting.NewFakePassiveClock(t0))
	ctx := context.Background()
	deadline := func(tj *trainer.TrainJob) int64 {
		t.Helper()
		got, err := r.pinnedRuntime(ctx, tj)
		if err != nil {
			t.Fatalf("%s: %v", tj.Name, err)
		}
		return *got.RunPolicy.ActiveDeadlineSeconds
	}
	for _, tj := range []*trainer.TrainJob{a, b, c} {
		if got := deadline(tj); got != 60 {
			t.Fatalf("%s: deadline %d s after the restart, want the pinned 60 s", tj.Name, got)
		}
	}
	if lists != 1 || pages != 2 || gets != 0 {
		t.Fatalf("%d lists in %d pages and %d reads of a ConfigMap for three pinned jobs, want 1 list of 2 pages and no read", lists, pages, gets)
	}
	// Jobs not pinned before: pinned now, to the runtime as it is, without listing again.
	for _, tj := range []*trainer.TrainJob{d, fresh} {
		if got := deadline(tj); got != 600 {
			t.Fatalf("%s: deadline %d s, want the runtime's 600 s", tj.Name, got)
		}
	}
	if lists != 1 {
		t.Fatalf("listed the snapshots %d times", lists)
	}
	// A job of the same name, a new one: not the old one's snapshot.
	again := job("a")
	again.UID = "u-a-again"
	if _, err := r.pinnedRuntime(ctx, again); !errors.Is(err, errForeignSnapshot) {
		t.Fatalf("a new job under the old one's name: err = %v, want the snapshot conflict", err)
	}
}
