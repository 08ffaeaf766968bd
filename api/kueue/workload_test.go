package kueue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"
)

func TestLatestAdmission(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	wl := func(status metav1.ConditionStatus, at time.Time) kueuev1beta2.Workload {
		return kueuev1beta2.Workload{Status: kueuev1beta2.WorkloadStatus{Conditions: []metav1.Condition{
			{Type: kueuev1beta2.WorkloadQuotaReserved, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(-time.Second))},
			{Type: kueuev1beta2.WorkloadAdmitted, Status: status, LastTransitionTime: metav1.NewTime(at)},
		}}}
	}
	cases := map[string]struct {
		workloads []kueuev1beta2.Workload
		want      *time.Time
	}{
		"none":           {},
		"not admitted":   {workloads: []kueuev1beta2.Workload{wl(metav1.ConditionFalse, t0)}},
		"admitted":       {workloads: []kueuev1beta2.Workload{wl(metav1.ConditionTrue, t0)}, want: ptr.To(t0)},
		"the latest one": {workloads: []kueuev1beta2.Workload{wl(metav1.ConditionTrue, t0), wl(metav1.ConditionTrue, t0.Add(time.Hour)), wl(metav1.ConditionFalse, t0.Add(2*time.Hour))}, want: ptr.To(t0.Add(time.Hour))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, LatestAdmission(tc.workloads)); diff != "" {
				t.Errorf("LatestAdmission (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWorkerCluster(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	wl := func(cluster string, admitted *time.Time) kueuev1beta2.Workload {
		w := kueuev1beta2.Workload{}
		if cluster != "" {
			w.Status.ClusterName = ptr.To(cluster)
		}
		if admitted != nil {
			w.Status.Conditions = []metav1.Condition{{Type: kueuev1beta2.WorkloadAdmitted, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(*admitted)}}
		}
		return w
	}
	cases := map[string]struct {
		workloads []kueuev1beta2.Workload
		want      string
	}{
		"no workload":              {},
		"queued on the manager":    {workloads: []kueuev1beta2.Workload{wl("", nil)}},
		"dispatched":               {workloads: []kueuev1beta2.Workload{wl("worker-1", &t0)}, want: "worker-1"},
		"dispatched, not admitted": {workloads: []kueuev1beta2.Workload{wl("worker-2", nil)}, want: "worker-2"},
		"the latest admission": {
			workloads: []kueuev1beta2.Workload{wl("worker-1", ptr.To(t0.Add(time.Minute))), wl("worker-2", &t0), wl("", ptr.To(t0.Add(time.Hour)))},
			want:      "worker-1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := WorkerCluster(tc.workloads); got != tc.want {
				t.Errorf("WorkerCluster = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWorkloadFromUnstructured(t *testing.T) {
	const doc = `apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: trainjob-a-1f2e3, namespace: team-a}
spec:
  queueName: default
  priority: 100
  active: false
  podSets: [{name: node, count: 2, template: {spec: {containers: [{name: node, image: x}]}}}]
status:
  admission: {clusterQueue: gpus}
  conditions:
  - {type: Admitted, status: "True", reason: Admitted, message: "", lastTransitionTime: "2026-11-23T10:00:00Z"}
`
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	wl, err := Workload(u)
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		Queue, ClusterQueue string
		Priority            int32
		Active              bool
		Admitted            *time.Time
	}
	got := view{string(wl.Spec.QueueName), string(wl.Status.Admission.ClusterQueue), ptr.Deref(wl.Spec.Priority, 0), ptr.Deref(wl.Spec.Active, true), AdmittedAt(wl)}
	want := view{"default", "gpus", 100, false, ptr.To(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Workload (-want +got):\n%s", diff)
	}
	bad := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"priority": "high"}}}
	if _, err := Workload(bad); err == nil {
		t.Error("a Workload whose spec.priority is a string decoded without error")
	}
}
