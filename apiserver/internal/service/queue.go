package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

var kueueGroup = kueue.GroupVersion.Group

// Queues implements kilnv1connect.QueueServiceHandler from the shared cache.
type Queues struct {
	kube *kube.Clients
	jobs *TrainJobs
}

var _ kilnv1connect.QueueServiceHandler = (*Queues)(nil)

// NewQueues serves Kueue's queues through k; jobs reads TrainJobs for their positions.
func NewQueues(k *kube.Clients, jobs *TrainJobs) *Queues { return &Queues{kube: k, jobs: jobs} }

var errNoKueue = connect.NewError(connect.CodeFailedPrecondition, errors.New("Kueue is not installed in this cluster: there are no queues (install Kueue: the Kiln API server notices it within 10s)"))

// ListQueues implements kilnv1connect.QueueServiceHandler.
func (s *Queues) ListQueues(ctx context.Context, req *connect.Request[kilnv1.ListQueuesRequest]) (*connect.Response[kilnv1.ListQueuesResponse], error) {
	m := req.Msg
	if errs := validateScope(m.GetNamespace(), m.GetAllNamespaces()); len(errs) > 0 {
		return nil, invalid(errs)
	}
	if !s.kube.Kueue() {
		return nil, errNoKueue
	}
	ns := m.GetNamespace()
	if m.GetAllNamespaces() {
		ns = ""
	}
	attrs := kube.Attributes{Verb: "list", Group: kueueGroup, Resource: "localqueues", Namespace: ns}
	ok, reason, err := s.kube.Authorizer.Allowed(ctx, attrs)
	if err != nil {
		return nil, toConnect("authorizing "+attrs.String(), err)
	}
	if !ok {
		return nil, denied(caller(ctx), attrs.String(), reason)
	}
	lqs := kube.NewList(kube.LocalQueueGVK)
	if err := s.kube.Cache.List(ctx, lqs, client.InNamespace(ns)); err != nil {
		return nil, toConnect("listing LocalQueues", err)
	}
	res := &kilnv1.ListQueuesResponse{}
	for i := range lqs.Items {
		lq := &lqs.Items[i]
		var cqName string
		if typed, err := kueue.LocalQueue(lq); err == nil {
			cqName = string(typed.Spec.ClusterQueue)
		}
		res.Queues = append(res.Queues, view.Queue(lq, s.clusterQueue(ctx, cqName)))
	}
	slices.SortFunc(res.Queues, func(a, b *kilnv1.Queue) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return connect.NewResponse(res), nil
}

// clusterQueue returns the ClusterQueue when the caller may read it (its quota is the
// admin's to show), else nil.
func (s *Queues) clusterQueue(ctx context.Context, name string) *unstructured.Unstructured {
	if name == "" {
		return nil
	}
	if ok, _, err := s.kube.Authorizer.Allowed(ctx, kube.Attributes{Verb: "get", Group: kueueGroup, Resource: "clusterqueues", Name: name}); err != nil || !ok {
		return nil
	}
	cq := kube.New(kube.ClusterQueueGVK)
	if err := s.kube.Cache.Get(ctx, client.ObjectKey{Name: name}, cq); err != nil {
		return nil
	}
	return cq
}

// GetQueuePosition implements kilnv1connect.QueueServiceHandler.
func (s *Queues) GetQueuePosition(ctx context.Context, req *connect.Request[kilnv1.GetQueuePositionRequest]) (*connect.Response[kilnv1.GetQueuePositionResponse], error) {
	m := req.Msg
	if errs := validateRef(m.GetNamespace(), m.GetName()); len(errs) > 0 {
		return nil, invalid(errs)
	}
	if !s.kube.Kueue() {
		return nil, errNoKueue
	}
	tj, err := s.jobs.get(ctx, m.GetNamespace(), m.GetName())
	if err != nil {
		return nil, err
	}
	if tj.Labels[trainer.KueueQueueNameLabel] == "" {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("TrainJob %s/%s is not queued: it has no label %s",
			tj.Namespace, tj.Name, trainer.KueueQueueNameLabel))
	}
	wl := s.jobs.views.workload(ctx, tj)
	if wl == nil {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("Kueue has not created the workload of TrainJob %s/%s yet; retry in a moment", tj.Namespace, tj.Name))
	}
	return connect.NewResponse(&kilnv1.GetQueuePositionResponse{Position: s.jobs.views.position(ctx, wl)}), nil
}
