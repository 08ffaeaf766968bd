package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

// SuspendTrainJob implements kilnv1connect.TrainJobServiceHandler.
func (s *TrainJobs) SuspendTrainJob(ctx context.Context, req *connect.Request[kilnv1.SuspendTrainJobRequest]) (*connect.Response[kilnv1.SuspendTrainJobResponse], error) {
	tj, err := s.setSuspended(ctx, req.Msg.GetNamespace(), req.Msg.GetName(), true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kilnv1.SuspendTrainJobResponse{TrainJob: tj}), nil
}

// ResumeTrainJob implements kilnv1connect.TrainJobServiceHandler.
func (s *TrainJobs) ResumeTrainJob(ctx context.Context, req *connect.Request[kilnv1.ResumeTrainJobRequest]) (*connect.Response[kilnv1.ResumeTrainJobResponse], error) {
	tj, err := s.setSuspended(ctx, req.Msg.GetNamespace(), req.Msg.GetName(), false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&kilnv1.ResumeTrainJobResponse{TrainJob: tj}), nil
}

// setSuspended suspends or resumes a job as the caller. A job that Kueue manages is
// suspended by deactivating its Workload (spec.active=false): Kueue owns such a job's
// spec.suspend and would undo a direct change, while a deactivated workload is evicted,
// releases its quota and stays out of the queue until it is reactivated.
func (s *TrainJobs) setSuspended(ctx context.Context, namespace, name string, suspend bool) (*kilnv1.TrainJob, error) {
	if errs := validateRef(namespace, name); len(errs) > 0 {
		return nil, invalid(errs)
	}
	verb := map[bool]string{true: "suspending", false: "resuming"}[suspend]
	what := fmt.Sprintf("%s TrainJob %s/%s", verb, namespace, name)
	tj := &trainer.TrainJob{}
	if err := s.kube.AsCaller.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, tj); err != nil {
		return nil, toConnect(what, err)
	}
	if state, _, _ := view.State(tj, nil); state == kilnv1.State_STATE_COMPLETE || state == kilnv1.State_STATE_FAILED {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%s: the job is %s: a finished job cannot be suspended or resumed; submit it again",
			what, map[kilnv1.State]string{kilnv1.State_STATE_COMPLETE: "Complete", kilnv1.State_STATE_FAILED: "Failed"}[state]))
	}
	if s.kube.Kueue() && tj.Labels[trainer.KueueQueueNameLabel] != "" {
		if err := s.setWorkloadActive(ctx, tj, !suspend, what); err != nil {
			return nil, err
		}
		v := s.views.view(ctx, tj, viewOptions{})
		// Kueue acts on the workload in a moment; the answer already says what it will do.
		switch {
		case suspend:
			v.Status.State, v.Status.Reason, v.Status.Message = kilnv1.State_STATE_SUSPENDED, view.ReasonDeactivated,
				"suspended: Kueue stops its pods and releases its quota; resume it to queue it again"
		case ptr.Deref(tj.Spec.Suspend, false):
			v.Status.State, v.Status.Reason, v.Status.Message = kilnv1.State_STATE_QUEUED, view.ReasonQueued,
				"back in queue "+tj.Labels[trainer.KueueQueueNameLabel]
		}
		v.Status.Status = view.Status(tj, v.Status.State)
		return v, nil
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend))
	if err := s.kube.AsCaller.Patch(ctx, tj, patch, client.FieldOwner(FieldManager)); err != nil {
		return nil, toConnect(what, err)
	}
	return s.views.view(ctx, tj, viewOptions{}), nil
}

// setWorkloadActive sets the job's Kueue Workload's spec.active as the caller.
func (s *TrainJobs) setWorkloadActive(ctx context.Context, tj *trainer.TrainJob, active bool, what string) error {
	list := kube.NewList(kube.WorkloadGVK)
	if err := s.kube.AsCaller.List(ctx, list, client.InNamespace(tj.Namespace), client.MatchingLabels{trainer.KueueJobUIDLabel: string(tj.UID)}); err != nil {
		if meta.IsNoMatchError(err) {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%s: Kueue is not installed", what))
		}
		return toConnect(what+": reading its Kueue workload", err)
	}
	var wl *unstructured.Unstructured
	for i := range list.Items {
		if wl == nil || wl.GetCreationTimestamp().Time.Before(list.Items[i].GetCreationTimestamp().Time) {
			wl = &list.Items[i]
		}
	}
	if wl == nil {
		return connect.NewError(connect.CodeUnavailable, errors.New(what+": Kueue has not created the job's workload yet; retry in a moment"))
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"active":%t}}`, active))
	if err := s.kube.AsCaller.Patch(ctx, wl, patch, client.FieldOwner(FieldManager)); err != nil {
		return toConnect(what+": setting its Kueue workload's spec.active", err)
	}
	// Read your writes: views read workloads from the shared cache, so a GetTrainJob right
	// after this call would show the job as it was. Wait (briefly) for the cache to see it.
	key := client.ObjectKeyFromObject(wl)
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, cacheCatchUp, true, func(ctx context.Context) (bool, error) {
		cached := kube.New(kube.WorkloadGVK)
		if err := s.kube.Cache.Get(ctx, key, cached); err != nil {
			return false, nil //nolint:nilerr // not in the cache yet: keep waiting
		}
		got, found, _ := unstructured.NestedBool(cached.Object, "spec", "active")
		return (!found && active) || (found && got == active), nil
	})
	return nil
}

// cacheCatchUp bounds how long a write waits for the shared cache to see it.
const cacheCatchUp = 3 * time.Second
