package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

func TestPosition(t *testing.T) {
	t0 := time.Unix(1000, 0)
	wl := func(ns, name, lq string, prio int32, at int) *Workload {
		return &Workload{Namespace: ns, Name: name, LocalQueue: lq, Priority: prio, Active: true, QueuedAt: t0.Add(time.Duration(at) * time.Second)}
	}
	me := wl("a", "me", "q", 0, 10)
	pending := []*Workload{
		me,
		wl("a", "earlier", "q", 0, 5),          // ahead in both queues
		wl("b", "other-team", "q", 0, 1),       // ahead in the ClusterQueue only
		wl("a", "urgent", "q", 100, 20),        // higher priority: ahead
		wl("a", "later", "q", 0, 30),           // behind
		wl("a", "low", "q", -5, 0),             // lower priority: behind
		wl("b", "later-other", "other", 0, 40), // behind
	}
	want := &kilnv1.QueuePosition{LocalQueue: "q", ClusterQueue: "cq", Workload: "me", PositionInLocalQueue: 3, PositionInClusterQueue: 4}
	if diff := cmp.Diff(want, Position(me, "cq", pending), protocmp.Transform()); diff != "" {
		t.Errorf("Position() mismatch (-want +got):\n%s", diff)
	}
	admitted := &Workload{Namespace: "a", Name: "run", LocalQueue: "q", ClusterQueue: "cq", Active: true, QuotaReserved: true, Admitted: true}
	if got := Position(admitted, "cq", pending); got.GetPositionInClusterQueue() != 0 || !got.GetAdmitted() {
		t.Errorf("Position() of an admitted workload = %v, want no position, admitted", got)
	}
}

func TestQueue(t *testing.T) {
	lq := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: default, namespace: team}
spec: {clusterQueue: cq}
status:
  pendingWorkloads: 2
  reservingWorkloads: 1
  admittedWorkloads: 1
  conditions: [{type: Active, status: "True", reason: Ready, message: ok, lastTransitionTime: "2026-01-01T00:00:00Z"}]
  flavorsUsage: [{name: gpu, resources: [{name: nvidia.com/gpu, total: "8"}]}]
`), &lq.Object); err != nil {
		t.Fatal(err)
	}
	cq := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors: [{name: gpu, resources: [{name: cpu, nominalQuota: 32}, {name: nvidia.com/gpu, nominalQuota: "32"}]}]
`), &cq.Object); err != nil {
		t.Fatal(err)
	}
	want := &kilnv1.Queue{Name: "default", Namespace: "team", ClusterQueue: "cq", Pending: 2, Reserving: 1, Admitted: 1, Active: true,
		Quota: []*kilnv1.FlavorQuota{{Flavor: "gpu", Resource: "cpu", Nominal: "32", Used: "0"}, {Flavor: "gpu", Resource: "nvidia.com/gpu", Nominal: "32", Used: "8"}}}
	if diff := cmp.Diff(want, Queue(lq, cq), protocmp.Transform()); diff != "" {
		t.Errorf("Queue() mismatch (-want +got):\n%s", diff)
	}
	wantUsage := []*kilnv1.FlavorQuota{{Flavor: "gpu", Resource: "nvidia.com/gpu", Used: "8"}}
	if diff := cmp.Diff(wantUsage, Queue(lq, nil).GetQuota(), protocmp.Transform()); diff != "" {
		t.Errorf("Queue() without ClusterQueue quota (-want +got):\n%s", diff)
	}
}
