package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

const operatorUser = "system:serviceaccount:kiln-system:kiln-operator"

// A ServiceAccount a job chooses is refused unless its caller may create pods there.
func TestServiceAccountTheCallerMayUse(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	withSA := kilntesting.MakeRuntime("with-sa").ClusterTrainingRuntime()
	withSA.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.ServiceAccountName = "trainer"
	own := kilntesting.MakeRuntime("own").TrainingRuntime("team")
	own.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.ServiceAccountName = "builder"
	objects := []client.Object{kilntesting.MakeRuntime("torch-distributed").ClusterTrainingRuntime(), withSA, own}
	var reviews []string
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			switch r := obj.(type) {
			case *authorizationv1.SubjectAccessReview:
				a := r.Spec.ResourceAttributes
				reviews = append(reviews, r.Spec.User+" "+a.Verb+" "+a.Resource+" in "+a.Namespace)
				r.Status.Allowed = r.Spec.User == "admin"
				return nil
			case *authenticationv1.SelfSubjectReview:
				r.Status.UserInfo.Username = operatorUser
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	sa := func(name string) trainer.RuntimePatch {
		return podPatch("example.com/team", trainer.PodSpecPatch{ServiceAccountName: ptr.To(name)})
	}
	for name, tc := range map[string]struct {
		user string
		job  *trainer.TrainJob
		want []string // empty: accepted
	}{
		"no ServiceAccount chosen":        {user: "alice", job: kilntesting.MakeTrainJob("job", "team").Obj()},
		"an admin's runtime chose it":     {user: "alice", job: kilntesting.MakeTrainJob("job", "team").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "with-sa").Obj()},
		"the namespace's default":         {user: "alice", job: kilntesting.MakeTrainJob("job", "team").RuntimePatch(sa("default")).Obj()},
		"a caller who may create pods":    {user: "admin", job: kilntesting.MakeTrainJob("job", "team").RuntimePatch(sa("cluster-admin-sa")).Obj()},
		"the operator (a schedule's run)": {user: operatorUser, job: kilntesting.MakeTrainJob("job", "team").RuntimePatch(sa("trainer")).Obj()},
		"a patch, by a caller with no pods": {
			user: "alice", job: kilntesting.MakeTrainJob("job", "team").RuntimePatch(sa("cluster-admin-sa")).Obj(),
			want: []string{"spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec: Forbidden",
				`runtime patch "example.com/team" runs replicated job "node"'s pods as ServiceAccount "cluster-admin-sa", which alice may not choose`},
		},
		"a namespaced runtime, by a caller with no pods": {
			user: "alice", job: kilntesting.MakeTrainJob("job", "team").RuntimeRef(trainer.TrainingRuntimeKind, "own").Obj(),
			want: []string{"spec.runtimeRef: Forbidden", `TrainingRuntime "own" runs replicated job "node"'s pods as ServiceAccount "builder"`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			reviews = nil
			v := &Validator{client: c, live: c, callers: &callers{c: c}}
			ctx := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UserInfo: authenticationv1.UserInfo{Username: tc.user},
			}})
			_, err := v.ValidateCreate(ctx, tc.job)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal lacks %q:\n%v", want, err)
				}
			}
			if len(reviews) != 1 || reviews[0] != "alice create pods in team" {
				t.Errorf("reviews %q, want one: alice create pods in team", reviews)
			}
		})
	}
}
