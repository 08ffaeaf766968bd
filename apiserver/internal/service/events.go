package service

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

// ListEvents implements kilnv1connect.TrainJobServiceHandler. Events are read as the
// caller: those of the TrainJob, its JobSet, Jobs, pods and Kueue workload, including
// those of pods that are gone (matched by name: <job>-<replicated job>-<index>-...).
func (s *TrainJobs) ListEvents(ctx context.Context, req *connect.Request[kilnv1.ListEventsRequest]) (*connect.Response[kilnv1.ListEventsResponse], error) {
	m := req.Msg
	if errs := validateRef(m.GetNamespace(), m.GetName()); len(errs) > 0 {
		return nil, invalid(errs)
	}
	what := fmt.Sprintf("listing events of TrainJob %s/%s", m.GetNamespace(), m.GetName())
	tj, err := s.get(ctx, m.GetNamespace(), m.GetName())
	if err != nil {
		return nil, err
	}
	uids := map[types.UID]bool{tj.UID: true}
	byLabel := client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{jobsetv1alpha2.JobSetNameKey: tj.Name})}
	pods := &corev1.PodList{}
	if err := s.kube.AsCaller.List(ctx, pods, client.InNamespace(tj.Namespace), byLabel); err == nil {
		for _, p := range pods.Items {
			uids[p.UID] = true
		}
	}
	js := &jobsetv1alpha2.JobSet{}
	if err := s.kube.AsCaller.Get(ctx, client.ObjectKeyFromObject(tj), js); err == nil {
		uids[js.UID] = true
	}
	if s.kube.Kueue() {
		wls := kube.NewList(kube.WorkloadGVK)
		if err := s.kube.AsCaller.List(ctx, wls, client.InNamespace(tj.Namespace), client.MatchingLabels{trainer.KueueJobUIDLabel: string(tj.UID)}); err == nil {
			for _, wl := range wls.Items {
				uids[wl.GetUID()] = true
			}
		}
	}
	owned := ownedName(tj)
	evs, err := s.kube.CoreAsCaller.CoreV1().Events(tj.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, toConnect(what, err)
	}
	res := &kilnv1.ListEventsResponse{}
	matched := make([]*corev1.Event, 0)
	for i := range evs.Items {
		e := &evs.Items[i]
		o := e.InvolvedObject
		switch {
		case uids[o.UID]:
		case (o.Kind == "TrainJob" || o.Kind == "JobSet") && o.Name == tj.Name:
		case (o.Kind == "Job" || o.Kind == "Pod") && owned.MatchString(o.Name):
		default:
			continue
		}
		matched = append(matched, e)
	}
	slices.SortStableFunc(matched, func(a, b *corev1.Event) int {
		_, la := view.EventTimes(a)
		_, lb := view.EventTimes(b)
		return la.Compare(lb)
	})
	for _, e := range matched {
		res.Events = append(res.Events, view.Event(e))
	}
	return connect.NewResponse(res), nil
}

// ownedName matches the names of the Jobs and pods of a TrainJob's JobSet:
// <job>-<replicated job>-<job index>[-<completion index>-<suffix>].
func ownedName(tj *trainer.TrainJob) *regexp.Regexp {
	rjs := []string{trainer.NodeName, trainer.LauncherName, trainer.AncestorDatasetInitializer, trainer.AncestorModelInitializer}
	for _, js := range tj.Status.JobsStatus {
		if !slices.Contains(rjs, js.Name) {
			rjs = append(rjs, js.Name)
		}
	}
	for i := range rjs {
		rjs[i] = regexp.QuoteMeta(rjs[i])
	}
	return regexp.MustCompile("^" + regexp.QuoteMeta(tj.Name) + "-(" + strings.Join(rjs, "|") + `)-\d+(-\d+-[a-z0-9]+)?$`)
}
