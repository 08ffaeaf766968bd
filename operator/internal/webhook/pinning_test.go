package webhook

import (
	"context"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// A new TrainJob is stamped with the hash of its runtime as the operator encodes it (a client's
// stamp replaced, a stamp removed when the runtime cannot be read), a runtime's edit changes the
// hash, and no update adds, changes or removes a stamp.
func TestDefaulterStampsTheRuntimeSnapshot(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rt := kilntesting.MakeRuntime("torch-distributed").ClusterTrainingRuntime()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rt).Build()
	d := &Defaulter{clock: clocktesting.NewFakePassiveClock(time.Now()), runtimes: c}
	h := newDefaulting(scheme, d)
	admit := func(op admissionv1.Operation, tj, old *trainer.TrainJob) *trainer.TrainJob {
		t.Helper()
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Object: raw(t, tj)}}
		if old != nil {
			req.OldObject = raw(t, old)
		}
		return applied(t, req, h.Handle(context.Background(), req))
	}
	stampOf := func(tj *trainer.TrainJob) string { return tj.Annotations[trainer.AnnotationRuntimeSnapshot] }

	_, want, err := trainer.EncodeRuntimeSnapshot(&trainer.RuntimeSnapshot{Kind: trainer.ClusterTrainingRuntimeKind, Name: rt.Name, Spec: rt.Spec})
	if err != nil {
		t.Fatal(err)
	}
	created := admit(admissionv1.Create, kilntesting.MakeTrainJob("job", "ns").Obj(), nil)
	if stampOf(created) != want {
		t.Fatalf("stamp %q, want the runtime's hash %q", stampOf(created), want)
	}
	forged := kilntesting.MakeTrainJob("forged", "ns").Obj()
	forged.Annotations = map[string]string{trainer.AnnotationRuntimeSnapshot: "0123456789abcdef"}
	if got := stampOf(admit(admissionv1.Create, forged, nil)); got != want {
		t.Errorf("a client's stamp: %q, want it replaced by %q", got, want)
	}
	missing := kilntesting.MakeTrainJob("missing", "ns").Obj()
	missing.Spec.RuntimeRef = trainer.RuntimeRef{Name: "absent", Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)}
	missing.Annotations = map[string]string{trainer.AnnotationRuntimeSnapshot: want}
	if got, ok := admit(admissionv1.Create, missing, nil).Annotations[trainer.AnnotationRuntimeSnapshot]; ok {
		t.Errorf("a job whose runtime does not exist is stamped %q, want no stamp", got)
	}

	changed := created.DeepCopy()
	changed.Annotations[trainer.AnnotationRuntimeSnapshot] = "0123456789abcdef"
	if got := stampOf(admit(admissionv1.Update, changed, created)); got != want {
		t.Errorf("an update changing the stamp: %q, want it kept, %q", got, want)
	}
	removed := created.DeepCopy()
	delete(removed.Annotations, trainer.AnnotationRuntimeSnapshot)
	if got := stampOf(admit(admissionv1.Update, removed, created)); got != want {
		t.Errorf("an update removing the stamp: %q, want it kept, %q", got, want)
	}
	unstamped := kilntesting.MakeTrainJob("old", "ns").Obj()
	added := unstamped.DeepCopy()
	added.Annotations = map[string]string{trainer.AnnotationRuntimeSnapshot: want}
	if got, ok := admit(admissionv1.Update, added, unstamped).Annotations[trainer.AnnotationRuntimeSnapshot]; ok {
		t.Errorf("an update stamping a job created unstamped: %q, want none (it is pinned to a snapshot of its own)", got)
	}

	// An edit of the runtime is a new version: a new hash (the remembered one is not reused).
	edited := &trainer.ClusterTrainingRuntime{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rt), edited); err != nil {
		t.Fatal(err)
	}
	edited.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = "example.com/edited:1"
	if err := c.Update(context.Background(), edited); err != nil {
		t.Fatal(err)
	}
	if got := stampOf(admit(admissionv1.Create, kilntesting.MakeTrainJob("after", "ns").Obj(), nil)); got == want || got == "" {
		t.Errorf("after the runtime's edit the stamp is %q (before it: %q), want a new hash", got, want)
	}
}
