// Package schedules is `kiln schedules`: schedules (CronTrainJobs) that create a TrainJob at
// each time of a cron expression. Each verb is a package of its own; this one wires them.
package schedules

import (
	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/cmd/schedules/create"
	deletecmd "github.com/kiln-ml/kiln/cli/internal/cmd/schedules/delete"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedules/describe"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedules/get"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedules/list"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedules/runs"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedules/suspend"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedules/trigger"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// NewCmdSchedules returns `kiln schedules` and its subcommands.
func NewCmdSchedules(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schedules <command>",
		Aliases: []string{"schedule"},
		Short:   "Run training jobs on a schedule (CronTrainJobs)",
		Long: `A schedule (a kiln.dev/v1alpha1 CronTrainJob) creates a training job, a run, at each time of a cron
expression, with CronJob's fields and meaning: a time zone, a concurrency policy (Allow, Forbid,
Replace), a starting deadline and history limits. Each run is a TrainJob named
NAME-<minute of its scheduled time>, told its scheduled time in $KILN_SCHEDULED_TIME.`,
		Example: `  kiln schedules create weekly-retrain --schedule "0 2 * * 0" --time-zone Europe/Berlin \
      --concurrency-policy Forbid --runtime torch-distributed --deadline 12h -- torchrun train.py
  kiln schedules list
  kiln schedules describe weekly-retrain
  kiln schedules trigger weekly-retrain`,
	}
	cmd.AddCommand(
		create.NewCmdCreate(f, nil), list.NewCmdList(f, nil), get.NewCmdGet(f, nil), describe.NewCmdDescribe(f, nil),
		runs.NewCmdRuns(f, nil), suspend.NewCmdSuspend(f, nil), suspend.NewCmdResume(f, nil), trigger.NewCmdTrigger(f, nil),
		deletecmd.NewCmdDelete(f, nil),
	)
	return cmd
}
