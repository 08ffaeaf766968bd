// Package kueue reads Kueue's objects for Kiln with Kueue's own API types
// (sigs.k8s.io/kueue/apis/kueue/v1beta2: a package that imports only apimachinery, so the
// module graph prunes the rest of Kueue away). The operator, the API server and the
// benchmarks read Workloads through it and nowhere else.
package kueue

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// GroupVersion is the Kueue API version Kiln reads.
var GroupVersion = kueuev1beta2.SchemeGroupVersion

// AddToScheme registers Kueue's types with a scheme.
var AddToScheme = kueuev1beta2.AddToScheme

// Workload decodes a Workload held as unstructured (as dynamic clients and informers hold it).
func Workload(u *unstructured.Unstructured) (*kueuev1beta2.Workload, error) {
	return decode[kueuev1beta2.Workload](u)
}

// LocalQueue decodes a LocalQueue held as unstructured.
func LocalQueue(u *unstructured.Unstructured) (*kueuev1beta2.LocalQueue, error) {
	return decode[kueuev1beta2.LocalQueue](u)
}

// ClusterQueue decodes a ClusterQueue held as unstructured.
func ClusterQueue(u *unstructured.Unstructured) (*kueuev1beta2.ClusterQueue, error) {
	return decode[kueuev1beta2.ClusterQueue](u)
}

func decode[T any](u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("decoding %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

// AdmittedAt is when Kueue last admitted the Workload (its Admitted condition turned True),
// nil while it is not admitted.
func AdmittedAt(wl *kueuev1beta2.Workload) *time.Time {
	c := meta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	t := c.LastTransitionTime.Time
	return &t
}

// LatestAdmission is the latest admission among workloads (a job has one Workload, but a
// re-created one may briefly coexist with its predecessor), nil when none is admitted.
func LatestAdmission(workloads []kueuev1beta2.Workload) *time.Time {
	var latest *time.Time
	for i := range workloads {
		if t := AdmittedAt(&workloads[i]); t != nil && (latest == nil || t.After(*latest)) {
			latest = t
		}
	}
	return latest
}

// WorkerCluster is the worker cluster MultiKueue dispatched the job of these workloads to
// (a MultiKueueCluster's name, from the latest admitted one that names one), "" when no
// worker holds it: not dispatched yet, or evicted to be dispatched again.
func WorkerCluster(workloads []kueuev1beta2.Workload) string {
	var cluster string
	var at time.Time
	for i := range workloads {
		wl := &workloads[i]
		if wl.Status.ClusterName == nil || *wl.Status.ClusterName == "" {
			continue
		}
		if t := AdmittedAt(wl); cluster == "" || (t != nil && t.After(at)) {
			cluster = *wl.Status.ClusterName
			if t != nil {
				at = *t
			}
		}
	}
	return cluster
}
