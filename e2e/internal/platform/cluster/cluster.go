// Package cluster is the platform's client of its own cluster: server-side apply as the
// harness, and waits for what it applied to be served.
package cluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager owns everything the harness applies.
const FieldManager = "kiln-platform"

var (
	NodeGVR  = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	CRDGVR   = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	LeaseGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
)

// Clients bundles the clients the harness needs.
type Clients struct {
	Config *rest.Config
	Disco  *discovery.DiscoveryClient
	Dyn    dynamic.Interface
	Mapper *restmapper.DeferredDiscoveryRESTMapper
}

// New makes the clients of cfg, with the harness's client budget.
func New(cfg *rest.Config) (*Clients, error) {
	cfg.QPS, cfg.Burst = 50, 100
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating dynamic client: %w", err)
	}
	return &Clients{
		Config: cfg,
		Disco:  disco,
		Dyn:    dyn,
		Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
	}, nil
}

// Apply server-side applies objects in order, refreshing discovery when a kind is new.
func (cs *Clients) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := cs.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			cs.Mapper.Reset()
			mapping, err = cs.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return fmt.Errorf("mapping %s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = cs.Dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = cs.Dyn.Resource(mapping.Resource).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// WaitCRDsEstablished waits until the apiserver serves every CRD among objs.
func (cs *Clients) WaitCRDsEstablished(ctx context.Context, objs []*unstructured.Unstructured) error {
	gvr := CRDGVR
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		name := obj.GetName()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := cs.Dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return ConditionTrue(crd, "Established"), nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s is not established: %w", name, err)
		}
	}
	cs.Mapper.Reset()
	return nil
}

// ConditionTrue reports whether obj's status has condition t with status True.
func ConditionTrue(obj *unstructured.Unstructured, t string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == t {
			return m["status"] == "True"
		}
	}
	return false
}
