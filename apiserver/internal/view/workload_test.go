package view

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// A job that MultiKueue dispatched shows the worker cluster its Workload names.
func TestTrainJobCluster(t *testing.T) {
	wl := &kueuev1beta2.Workload{ObjectMeta: metav1.ObjectMeta{Name: "trainjob-a", Namespace: "team"}, Spec: kueuev1beta2.WorkloadSpec{QueueName: "multicluster"}}
	wl.Status.ClusterName = ptr.To("kiln-worker-2")
	wl.Status.Conditions = []metav1.Condition{{Type: kueuev1beta2.WorkloadQuotaReserved, Status: metav1.ConditionTrue}, {Type: kueuev1beta2.WorkloadAdmitted, Status: metav1.ConditionTrue}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(wl)
	if err != nil {
		t.Fatal(err)
	}
	tj := kilntesting.MakeTrainJob("a", "team").Queue("multicluster").ManagedBy(trainer.MultiKueueControllerName).Obj()
	for name, tc := range map[string]struct {
		rel  Related
		want string
	}{
		"dispatched":     {rel: Related{Workload: WorkloadFrom(&unstructured.Unstructured{Object: obj})}, want: "kiln-worker-2"},
		"not dispatched": {rel: Related{}, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := TrainJob(tj, tc.rel).GetStatus().GetCluster(); got != tc.want {
				t.Errorf("status.cluster = %q, want %q", got, tc.want)
			}
		})
	}
}
