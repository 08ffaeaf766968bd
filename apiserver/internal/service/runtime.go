package service

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

// Runtimes implements kilnv1connect.RuntimeServiceHandler from the shared cache, for
// callers RBAC allows to read runtimes.
type Runtimes struct {
	kube *kube.Clients
}

var _ kilnv1connect.RuntimeServiceHandler = (*Runtimes)(nil)

// NewRuntimes serves runtimes through k.
func NewRuntimes(k *kube.Clients) *Runtimes { return &Runtimes{kube: k} }

func (s *Runtimes) authorize(ctx context.Context, attrs kube.Attributes) error {
	attrs.Group = trainer.GroupVersion.Group
	return authorize(ctx, s.kube, attrs)
}

// authorize asks Kubernetes whether the caller may do attrs: nil, or the error that says
// who may not do what, and why.
func authorize(ctx context.Context, k *kube.Clients, attrs kube.Attributes) error {
	ok, reason, err := k.Authorizer.Allowed(ctx, attrs)
	if err != nil {
		return toConnect("authorizing "+attrs.String(), err)
	}
	if !ok {
		return denied(caller(ctx), attrs.String(), reason)
	}
	return nil
}

// ListRuntimes implements kilnv1connect.RuntimeServiceHandler.
func (s *Runtimes) ListRuntimes(ctx context.Context, req *connect.Request[kilnv1.ListRuntimesRequest]) (*connect.Response[kilnv1.ListRuntimesResponse], error) {
	ns := req.Msg.GetNamespace()
	if errs := validateNamespace(field.NewPath("namespace"), ns, false); len(errs) > 0 {
		return nil, invalid(errs)
	}
	if err := s.authorize(ctx, kube.Attributes{Verb: "list", Resource: "clustertrainingruntimes"}); err != nil {
		return nil, err
	}
	res := &kilnv1.ListRuntimesResponse{}
	ctrs := &trainer.ClusterTrainingRuntimeList{}
	if err := s.kube.Cache.List(ctx, ctrs); err != nil {
		return nil, toConnect("listing ClusterTrainingRuntimes", err)
	}
	for i := range ctrs.Items {
		rt := &ctrs.Items[i]
		res.Runtimes = append(res.Runtimes, view.Runtime(&rt.ObjectMeta, trainer.ClusterTrainingRuntimeKind, &rt.Spec))
	}
	if ns != "" {
		if err := s.authorize(ctx, kube.Attributes{Verb: "list", Resource: "trainingruntimes", Namespace: ns}); err != nil {
			return nil, err
		}
		trs := &trainer.TrainingRuntimeList{}
		if err := s.kube.Cache.List(ctx, trs, client.InNamespace(ns)); err != nil {
			return nil, toConnect("listing TrainingRuntimes in "+ns, err)
		}
		for i := range trs.Items {
			rt := &trs.Items[i]
			res.Runtimes = append(res.Runtimes, view.Runtime(&rt.ObjectMeta, trainer.TrainingRuntimeKind, &rt.Spec))
		}
	}
	slices.SortFunc(res.Runtimes, func(a, b *kilnv1.Runtime) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return connect.NewResponse(res), nil
}

// GetRuntime implements kilnv1connect.RuntimeServiceHandler.
func (s *Runtimes) GetRuntime(ctx context.Context, req *connect.Request[kilnv1.GetRuntimeRequest]) (*connect.Response[kilnv1.GetRuntimeResponse], error) {
	m := req.Msg
	var errs field.ErrorList
	if m.GetName() == "" {
		errs = append(errs, field.Required(field.NewPath("name"), "the runtime's name, e.g. torch-distributed"))
	}
	namespaced := m.GetKind() == kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED
	errs = append(errs, validateNamespace(field.NewPath("namespace"), m.GetNamespace(), namespaced)...)
	if len(errs) > 0 {
		return nil, invalid(errs)
	}
	if !namespaced {
		if err := s.authorize(ctx, kube.Attributes{Verb: "get", Resource: "clustertrainingruntimes", Name: m.GetName()}); err != nil {
			return nil, err
		}
		rt := &trainer.ClusterTrainingRuntime{}
		if err := s.kube.Cache.Get(ctx, client.ObjectKey{Name: m.GetName()}, rt); err != nil {
			return nil, toConnect(fmt.Sprintf("getting ClusterTrainingRuntime %s", m.GetName()), err)
		}
		return connect.NewResponse(&kilnv1.GetRuntimeResponse{Runtime: view.Runtime(&rt.ObjectMeta, trainer.ClusterTrainingRuntimeKind, &rt.Spec)}), nil
	}
	if err := s.authorize(ctx, kube.Attributes{Verb: "get", Resource: "trainingruntimes", Namespace: m.GetNamespace(), Name: m.GetName()}); err != nil {
		return nil, err
	}
	rt := &trainer.TrainingRuntime{}
	if err := s.kube.Cache.Get(ctx, client.ObjectKey{Namespace: m.GetNamespace(), Name: m.GetName()}, rt); err != nil {
		return nil, toConnect(fmt.Sprintf("getting TrainingRuntime %s/%s", m.GetNamespace(), m.GetName()), err)
	}
	return connect.NewResponse(&kilnv1.GetRuntimeResponse{Runtime: view.Runtime(&rt.ObjectMeta, trainer.TrainingRuntimeKind, &rt.Spec)}), nil
}
