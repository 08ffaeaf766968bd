package platform

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
)

// TrainJobAPI is a client of Kiln's API server as the demo user, from the client
// configuration `up` wrote, and the context it resolved (server, token, namespace).
func (c Config) TrainJobAPI() (kilnv1connect.TrainJobServiceClient, clientconfig.Context, error) {
	cfg, err := clientconfig.Load(c.ClientConfigFile())
	if err != nil {
		return nil, clientconfig.Context{}, err
	}
	kc, err := cfg.Resolve()
	if err != nil {
		return nil, clientconfig.Context{}, err
	}
	hc, err := kc.AuthenticatedClient()
	if err != nil {
		return nil, clientconfig.Context{}, err
	}
	return kilnv1connect.NewTrainJobServiceClient(hc, kc.Server), kc, nil
}

// Kinds the harness's watches and scenarios read without their Go types.
var (
	JobSetGVK   = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}
	WorkloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}
)

// UnstructuredOf is an empty object of kind gvk.
func UnstructuredOf(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// EventHandlers calls on for every add, update and delete an informer sees, with deleted
// true for deletions (the last known state when the informer missed the deletion itself).
func EventHandlers(on func(obj any, deleted bool)) toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { on(obj, false) },
		UpdateFunc: func(_, obj any) { on(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			on(obj, true)
		},
	}
}
