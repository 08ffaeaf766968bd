// Command kube-scheduler is Kubernetes' scheduler with the scheduler-plugins coscheduling
// plugin registered (gang scheduling of PodGroups).
//
// Two changes to the plugin, both about a gang that does not fit yet:
//
//   - Its PreFilter rejects a gang whose PodGroup's minResources do not fit in the cluster's
//     free capacity, but it registers only pod and PodGroup adds as the events that may make
//     a rejected pod schedulable. A gang turned away for capacity then waited for the
//     scheduler's 5-minute flush of unschedulable pods however soon capacity freed. Here it
//     also registers what frees capacity: a pod deleted, a node added or its allocatable
//     changed.
//   - That capacity check counts every node, also those none of the gang's pods may run on
//     (tainted, or outside their node selector and required affinity). A gang short of room
//     on its own nodes then passed it while others had room (a fleet with spot or reserved
//     pools), and looped: a few pods assumed and held at Permit, the next one not fitting,
//     all of them released, and again, some hundred times a second, each time writing the
//     pods' PodScheduled condition. Here the check also runs over the nodes some pod of the
//     gang can use, so such a gang waits quietly, rejected at PreFilter, until a pod is
//     deleted or a node added.
package main

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/cli"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling/core"
	"sigs.k8s.io/scheduler-plugins/pkg/util"

	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
)

// gang is the coscheduling plugin, retried when capacity frees, whose capacity check counts
// only the nodes its pods can use.
type gang struct {
	*coscheduling.Coscheduling
	podGroups client.Reader
	pods      listersv1.PodLister
}

func (g gang) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	events, err := g.Coscheduling.EventsToRegister(ctx)
	return append(events,
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}},
	), err
}

// PreFilter is the plugin's, then the gang's minResources against the free capacity of the
// nodes some pod of the gang can use. UnschedulableAndUnresolvable, as the plugin's own
// capacity check: no preemption for it.
func (g gang) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	result, status := g.Coscheduling.PreFilter(ctx, state, pod, nodes)
	if !status.IsSuccess() {
		return result, status
	}
	name := util.GetPodGroupLabel(pod)
	if name == "" {
		return result, status
	}
	pg := &v1alpha1.PodGroup{}
	if err := g.podGroups.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: name}, pg); err != nil || pg.Spec.MinResources == nil {
		return result, status // the plugin's Permit refuses a pod whose PodGroup is gone
	}
	members, err := g.pods.Pods(pod.Namespace).List(labels.SelectorFromSet(labels.Set{v1alpha1.PodGroupLabel: name}))
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if err := fitsOwnNodes(ctx, pg, members, nodes); err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	return result, status
}

// fitsOwnNodes checks the PodGroup's minResources (and minMember pods) against the free
// capacity of the nodes some member tolerates and selects, the group's own pods not
// counted as using any (as the plugin's check).
func fitsOwnNodes(ctx context.Context, pg *v1alpha1.PodGroup, members []*corev1.Pod, nodes []fwk.NodeInfo) error {
	logger := klog.FromContext(ctx)
	var own []fwk.NodeInfo
	for _, n := range nodes {
		node := n.Node()
		if node == nil {
			continue
		}
		for _, p := range members {
			_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			}, false)
			if untolerated {
				continue
			}
			if ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(node); ok {
				own = append(own, n)
				break
			}
		}
	}
	need := pg.Spec.MinResources.DeepCopy()
	need[corev1.ResourcePods] = *resource.NewQuantity(int64(pg.Spec.MinMember), resource.DecimalSI)
	if err := core.CheckClusterResource(ctx, own, need, pg.Namespace+"/"+pg.Name); err != nil {
		return fmt.Errorf("PodGroup %s/%s does not fit on the %d nodes its pods can use: %w", pg.Namespace, pg.Name, len(own), err)
	}
	return nil
}

func newGang(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	p, err := coscheduling.New(ctx, obj, h)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	podGroups, _, err := util.NewClientWithCachedReader(ctx, h.KubeConfig(), scheme)
	if err != nil {
		return nil, err
	}
	return gang{Coscheduling: p.(*coscheduling.Coscheduling), podGroups: podGroups, pods: h.SharedInformerFactory().Core().V1().Pods().Lister()}, nil
}

func main() {
	// The plugins' controller-runtime clients log through klog, as the scheduler does.
	ctrllog.SetLogger(klog.NewKlogr())
	os.Exit(cli.Run(app.NewSchedulerCommand(app.WithPlugin(coscheduling.Name, newGang))))
}
