package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
