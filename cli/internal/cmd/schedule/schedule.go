// Package schedule is `kiln schedule`: schedules (CronTrainJobs) that create a TrainJob at
// each time of a cron expression. Each verb is a package of its own; this one wires them.
package schedule

import (
	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/cmd/schedule/create"
	deletecmd "github.com/kiln-ml/kiln/cli/internal/cmd/schedule/delete"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedule/describe"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedule/get"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedule/list"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedule/runs"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedule/suspend"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedule/trigger"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// NewCmdSchedule returns `kiln schedule` and its subcommands.
func NewCmdSchedule(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schedule <command>",
		Aliases: []string{"schedules"},
		Short:   "Run training jobs on a schedule (CronTrainJobs)",
		Long: `A schedule (a kiln.dev/v1alpha1 CronTrainJob) creates a training job, a run, at each time of a cron
expression, with CronJob's fields and meaning: a time zone, a concurrency policy (Allow, Forbid,
Replace), a starting deadline and history limits. Each run is a TrainJob named
NAME-<minute of its scheduled time>, told its scheduled time in $KILN_SCHEDULED_TIME.`,
		Example: `  kiln schedule create weekly-retrain --schedule "0 2 * * 0" --time-zone Europe/Berlin \
      --concurrency-policy Forbid --runtime torch-distributed --deadline 12h -- torchrun train.py
  kiln schedule list
  kiln schedule describe weekly-retrain
  kiln schedule trigger weekly-retrain`,
	}
	cmd.AddCommand(
		create.NewCmdCreate(f, nil), list.NewCmdList(f, nil), get.NewCmdGet(f, nil), describe.NewCmdDescribe(f, nil),
		runs.NewCmdRuns(f, nil), suspend.NewCmdSuspend(f, nil), suspend.NewCmdResume(f, nil), trigger.NewCmdTrigger(f, nil),
		deletecmd.NewCmdDelete(f, nil),
	)
	return cmd
}
