// Command kube-scheduler is Kubernetes' scheduler with the scheduler-plugins coscheduling
// plugin registered (gang scheduling of PodGroups).
//
// One change to the plugin: its PreFilter rejects a gang whose PodGroup's minResources do
// not fit in the cluster's free capacity, but it registers only pod and PodGroup adds as the
// events that may make a rejected pod schedulable. A gang turned away for capacity then
// waited for the scheduler's 5-minute flush of unschedulable pods however soon capacity
// freed. Here it also registers what frees capacity: a pod deleted, a node added or its
// allocatable changed.
package main

import (
	"context"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/cli"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"

	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
)

// gang is the coscheduling plugin, retried when capacity frees.
type gang struct {
	*coscheduling.Coscheduling
}

func (g gang) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	events, err := g.Coscheduling.EventsToRegister(ctx)
	return append(events,
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}},
	), err
}

func newGang(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	p, err := coscheduling.New(ctx, obj, h)
	if err != nil {
		return nil, err
	}
	return gang{p.(*coscheduling.Coscheduling)}, nil
}

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(app.WithPlugin(coscheduling.Name, newGang))))
}
