// Command kube-scheduler is Kubernetes' scheduler with the scheduler-plugins coscheduling
// plugin registered (gang scheduling of PodGroups).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"

	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(app.WithPlugin(coscheduling.Name, coscheduling.New))))
}
