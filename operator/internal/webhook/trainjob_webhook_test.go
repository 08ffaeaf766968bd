package webhook

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// A runtime created a moment before its first job (one `kubectl apply` of both) may not be
// in the webhook's cache yet: the webhook reads past the cache before refusing the job.
func TestValidatorReadsARuntimeTheCacheHasNotSeen(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cache := fake.NewClientBuilder().WithScheme(scheme).Build()
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(kilntesting.MakeRuntime("torch-distributed").ClusterTrainingRuntime()).Build()
	tj := kilntesting.MakeTrainJob("job", "ns").Obj()

	if _, err := (&Validator{client: cache, live: live}).ValidateCreate(context.Background(), tj); err != nil {
		t.Errorf("a runtime only the apiserver has yet: %v", err)
	}
	_, err := (&Validator{client: cache, live: fake.NewClientBuilder().WithScheme(scheme).Build()}).ValidateCreate(context.Background(), tj)
	if err == nil || !strings.Contains(err.Error(), "create the runtime first") {
		t.Errorf("a runtime nobody has: %v, want the refusal naming the fix", err)
	}
}
