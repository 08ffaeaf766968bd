package kube

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kiln-ml/kiln/api/kueue"
)

// Kueue's kinds, read as unstructured objects.
var (
	WorkloadGVK     = kueue.GroupVersion.WithKind("Workload")
	LocalQueueGVK   = kueue.GroupVersion.WithKind("LocalQueue")
	ClusterQueueGVK = kueue.GroupVersion.WithKind("ClusterQueue")
	FlavorGVK       = kueue.GroupVersion.WithKind("ResourceFlavor")
	TopologyGVK     = kueue.GroupVersion.WithKind("Topology")
)

// NodeMeta is an empty Node held as its metadata only: the server reads nodes' labels
// (where a job was placed on a topology) and nothing else of them.
func NodeMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}
}

// NewList returns an empty unstructured list of gvk's kind.
func NewList(gvk schema.GroupVersionKind) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return l
}

// New returns an empty unstructured object of gvk's kind.
func New(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}
