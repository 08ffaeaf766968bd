package service

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// Heartbeat periods of WatchTrainJobs.
const (
	defaultHeartbeat = 15 * time.Second
	maxHeartbeat     = 300 * time.Second
)

// errShuttingDown ends streams when the server stops; clients resume elsewhere.
var errShuttingDown = connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down: resume the stream (watches resume from their last resource_version)"))

// WatchTrainJobs implements kilnv1connect.TrainJobServiceHandler. It watches Kubernetes as
// the caller, so RBAC decides what the stream may carry.
func (s *TrainJobs) WatchTrainJobs(ctx context.Context, req *connect.Request[kilnv1.WatchTrainJobsRequest], stream *connect.ServerStream[kilnv1.WatchTrainJobsResponse]) error {
	m := req.Msg
	errs := validateScope(m.GetNamespace(), m.GetAllNamespaces())
	selector, serrs := parseSelector(m.GetLabelSelector())
	errs = append(errs, serrs...)
	if m.GetName() != "" {
		errs = append(errs, validateRef(cmp.Or(m.GetNamespace(), "default"), m.GetName())...)
	}
	heartbeat := time.Duration(m.GetHeartbeatSeconds()) * time.Second
	switch {
	case heartbeat == 0:
		heartbeat = defaultHeartbeat
	case heartbeat < time.Second || heartbeat > maxHeartbeat:
		errs = append(errs, field.Invalid(field.NewPath("heartbeat_seconds"), m.GetHeartbeatSeconds(), "must be between 1 and 300 (0 means 15)"))
	}
	if len(errs) > 0 {
		return invalid(errs)
	}
	namespace := m.GetNamespace()
	if m.GetAllNamespaces() {
		namespace = ""
	}
	opts := []client.ListOption{client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}}
	if m.GetName() != "" {
		opts = append(opts, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", m.GetName())})
	}
	w := &watcher{s: s, stream: stream, opts: opts, what: "watching TrainJobs"}
	return w.run(ctx, m.GetResourceVersion(), heartbeat)
}

type watcher struct {
	s      *TrainJobs
	stream *connect.ServerStream[kilnv1.WatchTrainJobsResponse]
	opts   []client.ListOption
	what   string
}

func (w *watcher) run(ctx context.Context, rv string, heartbeat time.Duration) error {
	var err error
	if rv == "" {
		if rv, err = w.sendCurrent(ctx); err != nil {
			return err
		}
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		kw, err := w.s.kube.AsCaller.Watch(ctx, &trainer.TrainJobList{}, append(w.opts,
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})...)
		if isTooOld(err) {
			if rv, err = w.sendCurrent(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return toConnect(w.what, err)
		}
		rv, err = w.forward(ctx, kw, rv, tick.C)
		kw.Stop()
		if errors.Is(err, errTooOld) {
			if rv, err = w.sendCurrent(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		// Kubernetes ends watches now and then: carry on from where this one got.
	}
}

var errTooOld = errors.New("resource version too old")

func isTooOld(err error) bool {
	return apierrors.IsGone(err) || apierrors.IsResourceExpired(err)
}

// forward sends the watch's events until it ends, and returns the version to go on from.
func (w *watcher) forward(ctx context.Context, kw watch.Interface, rv string, tick <-chan time.Time) (string, error) {
	for {
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case <-w.s.stopping():
			return rv, errShuttingDown
		case <-tick:
			if err := w.stream.Send(&kilnv1.WatchTrainJobsResponse{Type: kilnv1.WatchEventType_WATCH_EVENT_TYPE_HEARTBEAT, ResourceVersion: rv}); err != nil {
				return rv, err
			}
		case ev, ok := <-kw.ResultChan():
			if !ok {
				return rv, nil
			}
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if isTooOld(err) {
					return rv, errTooOld
				}
				return rv, toConnect(w.what, err)
			case watch.Bookmark:
				if o, ok := ev.Object.(client.Object); ok {
					rv = o.GetResourceVersion()
				}
				continue
			}
			tj, ok := ev.Object.(*trainer.TrainJob)
			if !ok {
				continue
			}
			rv = tj.ResourceVersion
			// Lists and gets of this server show this version (or the deletion) from now on,
			// though its cache may not have it yet.
			if ev.Type == watch.Deleted {
				w.s.kube.Recent.Gone(tj)
			} else {
				w.s.kube.Recent.Observed(tj)
			}
			typ := map[watch.EventType]kilnv1.WatchEventType{
				watch.Added: kilnv1.WatchEventType_WATCH_EVENT_TYPE_ADDED, watch.Modified: kilnv1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED,
				watch.Deleted: kilnv1.WatchEventType_WATCH_EVENT_TYPE_DELETED,
			}[ev.Type]
			if err := w.stream.Send(&kilnv1.WatchTrainJobsResponse{Type: typ, TrainJob: w.s.views.view(ctx, tj, viewOptions{}), ResourceVersion: rv}); err != nil {
				return rv, err
			}
		}
	}
}

// sendCurrent sends every matching job as ADDED, then SYNCED, and returns the version the
// list was read at.
func (w *watcher) sendCurrent(ctx context.Context) (string, error) {
	list := &trainer.TrainJobList{}
	if err := w.s.kube.AsCaller.List(ctx, list, w.opts...); err != nil {
		return "", toConnect(w.what, err)
	}
	slices.SortFunc(list.Items, func(a, b trainer.TrainJob) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for i := range list.Items {
		tj := &list.Items[i]
		if err := w.stream.Send(&kilnv1.WatchTrainJobsResponse{
			Type: kilnv1.WatchEventType_WATCH_EVENT_TYPE_ADDED, TrainJob: w.s.views.view(ctx, tj, viewOptions{}), ResourceVersion: list.ResourceVersion,
		}); err != nil {
			return "", err
		}
	}
	klog.FromContext(ctx).V(4).Info("Sent the current TrainJobs", "count", len(list.Items), "resourceVersion", list.ResourceVersion)
	if err := w.stream.Send(&kilnv1.WatchTrainJobsResponse{Type: kilnv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED, ResourceVersion: list.ResourceVersion}); err != nil {
		return "", err
	}
	return list.ResourceVersion, nil
}
