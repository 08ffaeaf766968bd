package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

const kueueUser = "system:serviceaccount:kueue-system:kueue-controller-manager"

func selectorPatch(manager string, at *metav1.Time, grace *int64) trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: manager, Time: at, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
			Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"pool": manager}, TerminationGracePeriodSeconds: grace}},
		}}}}},
	}}}
}

func raw(t *testing.T, v any) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

// applied is the request's object with the response's patch applied, decoded.
func applied(t *testing.T, req admission.Request, res admission.Response) *trainer.TrainJob {
	t.Helper()
	if !res.Allowed {
		t.Fatalf("refused: %+v", res.Result)
	}
	doc := req.Object.Raw
	if len(res.Patches) > 0 {
		ops, err := json.Marshal(res.Patches)
		if err != nil {
			t.Fatal(err)
		}
		p, err := jsonpatchapply.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if doc, err = p.Apply(doc); err != nil {
			t.Fatalf("applying %s: %v", ops, err)
		}
	}
	out := &trainer.TrainJob{}
	if err := json.Unmarshal(doc, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The defaulting webhook answers with a patch of only what the Defaulter changed, and that
// patch gives the object controller-runtime's generic defaulter gives, in every case the
// Defaulter changes something: a new job's runtime patches and inherited annotation, Kueue's
// rewrite (its TTL and another manager's field restored), a changed patch, and none.
func TestDefaultingPatchesWhatTheDefaulterChanged(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rt := kilntesting.MakeRuntime("torch-distributed").ClusterTrainingRuntime()
	rt.Annotations = map[string]string{kiln.AnnotationProgressDeadline: "10m"}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC))
	d := &Defaulter{clock: clk, preserveFor: []string{kueueUser}, runtimes: fake.NewClientBuilder().WithScheme(scheme).WithObjects(rt).Build()}
	h := newDefaulting(scheme, d)

	earlier := metav1.NewTime(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	userPatch := selectorPatch("example.com/platform", &earlier, ptr.To[int64](10))
	created := kilntesting.MakeTrainJob("job", "ns").RuntimePatch(userPatch).TTLSecondsAfterFinished(60).Obj()
	created.Spec.RuntimePatches = append(created.Spec.RuntimePatches, selectorPatch("kueue.x-k8s.io/manager", nil, nil))
	withOwn := created.DeepCopy()
	withOwn.Annotations = map[string]string{kiln.AnnotationProgressDeadline: "1m", "team": "a"}
	stored := created.DeepCopy()
	stored.Annotations = map[string]string{kiln.AnnotationProgressDeadline: "10m"}
	stored.Spec.RuntimePatches[1].Time = &earlier
	// Kueue's rewrite, with types that lack the TTL and the grace period.
	rewritten := stored.DeepCopy()
	rewritten.Spec.TTLSecondsAfterFinished = nil
	rewritten.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.TerminationGracePeriodSeconds = nil
	rewritten.Spec.RuntimePatches[1] = selectorPatch("kueue.x-k8s.io/manager", &earlier, ptr.To[int64](5))
	changed := stored.DeepCopy()
	changed.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector["pool"] = "b"

	for name, tc := range map[string]struct {
		op       admissionv1.Operation
		user     string
		obj, old *trainer.TrainJob
		wantOps  int
	}{
		"a new job: the patch without a time stamped, the runtime's annotation inherited": {op: admissionv1.Create, obj: created, wantOps: 2},
		"a new job with annotations of its own":                                           {op: admissionv1.Create, obj: withOwn, wantOps: 2},
		"Kueue's rewrite: its TTL and the other manager's field restored, its changed patch stamped": {
			op: admissionv1.Update, user: kueueUser, obj: rewritten, old: stored, wantOps: 3},
		"a user's change of a patch":              {op: admissionv1.Update, user: "alice", obj: changed, old: stored, wantOps: 1},
		"an update that changes no patch":         {op: admissionv1.Update, user: "alice", obj: stored, old: stored, wantOps: 0},
		"a user's removal of the TTL stays as is": {op: admissionv1.Update, user: "alice", obj: rewritten, old: stored, wantOps: 2},
	} {
		t.Run(name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: tc.op, UserInfo: authenticationv1.UserInfo{Username: tc.user}, Object: raw(t, tc.obj),
			}}
			if tc.old != nil {
				req.OldObject = raw(t, tc.old)
			}
			res := h.Handle(context.Background(), req)
			if len(res.Patches) != tc.wantOps {
				t.Errorf("%d operations, want %d: %+v", len(res.Patches), tc.wantOps, res.Patches)
			}
			got, want := applied(t, req, res), applied(t, req, h.generic.Handle(context.Background(), req))
			if !apiequality.Semantic.DeepEqual(got, want) {
				gotJSON, _ := json.Marshal(got)
				wantJSON, _ := json.Marshal(want)
				t.Errorf("the patched object differs from the generic defaulter's:\n got %s\nwant %s", gotJSON, wantJSON)
			}
		})
	}

	t.Run("a deletion and an undecodable object", func(t *testing.T) {
		if res := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Delete}}); !res.Allowed || len(res.Patches) > 0 {
			t.Errorf("a deletion: %+v", res)
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","spec":{"trainer":{"numNodes":"two"}}}`)}}}
		if res := h.Handle(context.Background(), req); res.Allowed || res.Result == nil || res.Result.Code != http.StatusBadRequest {
			t.Errorf("an undecodable object: %+v, want 400 (schemaFirst lets the schema name the field)", res.Result)
		}
		// The Defaulter's own error (an old object it cannot read) is refused as the generic defaulter refuses it.
		req = admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update,
			Object: raw(t, created), OldObject: runtime.RawExtension{Raw: []byte(`{"spec":`)}}}
		res, want := h.Handle(context.Background(), req), h.generic.Handle(context.Background(), req)
		if res.Allowed || res.Result == nil || !strings.Contains(res.Result.Message, "decoding the TrainJob before the update") ||
			!apiequality.Semantic.DeepEqual(res.AdmissionResponse, want.AdmissionResponse) {
			t.Errorf("the Defaulter's error: %+v, want the generic defaulter's %+v", res.Result, want.Result)
		}
	})
}

// A change of any other field is not read off the Defaulter's fields: the handler then
// answers as the generic defaulter does.
func TestDefaultingPatchRefusesOtherChanges(t *testing.T) {
	before := kilntesting.MakeTrainJob("job", "ns").RuntimePatch(selectorPatch("example.com/platform", nil, nil)).Obj()
	for name, change := range map[string]func(*trainer.TrainJob){
		"spec.suspend":    func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) },
		"metadata.labels": func(tj *trainer.TrainJob) { tj.Labels = map[string]string{"a": "b"} },
		"a patch added": func(tj *trainer.TrainJob) {
			tj.Spec.RuntimePatches = append(tj.Spec.RuntimePatches, trainer.RuntimePatch{Manager: "x.io/y"})
		},
	} {
		after := before.DeepCopy()
		change(after)
		if ops, ok := defaultingPatch(before, after); ok {
			t.Errorf("%s changed: answered %+v, want the generic defaulter", name, ops)
		}
	}
	if ops, ok := defaultingPatch(before, before.DeepCopy()); !ok || len(ops) != 0 {
		t.Errorf("nothing changed: %+v %t", ops, ok)
	}
}

// The handler's own cost on a create through Kueue (its runtime patch to stamp), without
// the runtime's read (a cache read in the operator).
func BenchmarkDefaulting(b *testing.B) {
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	h := newDefaulting(scheme, &Defaulter{clock: clocktesting.NewFakePassiveClock(time.Now())})
	gpus := resource.MustParse("8")
	tj := kilntesting.MakeTrainJob("job", "ns").NumNodes(2).Command("torchrun", "train.py").
		ResourcesPerNode(corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": gpus}}).
		RuntimePatch(selectorPatch("kueue.x-k8s.io/manager", nil, nil)).Obj()
	tj.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "default"}
	tj.Spec.Trainer.Env = []corev1.EnvVar{{Name: "STEPS", Value: "40"}, {Name: "LR", Value: "0.1"}}
	body, err := json.Marshal(tj)
	if err != nil {
		b.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: body}}}
	for name, handler := range map[string]admission.Handler{"targeted": h, "generic": h.generic} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res := handler.Handle(context.Background(), req); len(res.Patches) != 1 {
					b.Fatalf("%+v", res)
				}
			}
		})
	}
}
