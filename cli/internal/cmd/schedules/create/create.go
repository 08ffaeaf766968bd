// Package create is `kiln schedules create`: a schedule (CronTrainJob) whose runs are the
// job the flags or a manifest describe, as `kiln submit --schedule` creates it too.
package create

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/jobflags"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln schedules create` (or `kiln submit --schedule`) was asked.
type Options struct {
	Factory *factory.Factory
	// Job is each run; Schedule when they run.
	Job      jobflags.Job
	Schedule jobflags.Schedule
}

// NewCmdCreate returns the command: `kiln submit --schedule` with the schedule's name
// first; runF replaces its run in tests.
func NewCmdCreate(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "create NAME --schedule CRON [-f FILE | --runtime RUNTIME [flags]] [-- COMMAND [ARGS...]]",
		Short: "Create a schedule: a TrainJob run on a cron schedule",
		Long: `Create a schedule, a CronTrainJob: at each time its cron expression names, it creates a TrainJob (a
run) from the job the flags or the TrainJob manifest (-f) describe, as a CronJob creates Jobs. -f may
also be a CronTrainJob manifest.

--schedule is a cron expression (minute hour day-of-month month day-of-week) or @yearly, @monthly,
@weekly, @daily, @hourly, read in --time-zone (an IANA name; default UTC). --concurrency-policy says
what happens when a run falls due while the last one is still active (queued in Kueue, suspended or
running): Allow runs both, Forbid skips the new one, Replace deletes the old one. A run that cannot
start within --starting-deadline of its time is skipped; while the operator is down, missed times run
at most once, the latest, when it is back. --keep-successful and --keep-failed bound the finished
runs kept (default 3 and 1). --deadline bounds each run (never counting time queued in Kueue).

Each run is named NAME-<minute of its scheduled time> and is told its scheduled time in
$KILN_SCHEDULED_TIME (RFC 3339), to pick its data window.`,
		Example: `  # Retrain every Sunday at 02:00 Berlin time; never two at once; each run at most 12 hours
  kiln schedules create weekly-retrain --schedule "0 2 * * 0" --time-zone Europe/Berlin \
      --concurrency-policy Forbid --keep-successful 3 --keep-failed 1 \
      --runtime torch-distributed --queue default --deadline 12h -- torchrun train.py

  # Nightly, from a TrainJob manifest
  kiln schedules create nightly --schedule @daily -f trainjob.yaml`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			before := args
			if dash >= 0 {
				before, o.Job.Command = args[:dash], args[dash:]
			}
			if len(before) != 1 {
				return factory.Usagef("name the schedule once, before --: kiln schedules create NAME --schedule CRON ... -- COMMAND")
			}
			o.Job.Name = before[0]
			o.Job.Changed(cmd)
			o.Schedule.Changed(cmd)
			return factory.Run(cmd.Context(), o, runF, Run)
		},
	}
	o.Job.Add(cmd)
	o.Schedule.Add(cmd, true)
	for _, name := range []string{"name", "generate-name", "wait", "follow", "timeout"} {
		_ = cmd.Flags().MarkHidden(name)
	}
	return cmd
}

// Run creates the schedule and says when it runs next.
func Run(ctx context.Context, o *Options) error {
	req, err := o.Schedule.Request(&o.Job, o.Factory)
	if err != nil {
		return err
	}
	format, err := jobflags.Outputs.Parse(o.Job.Output)
	if err != nil {
		return err
	}
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	if req.Namespace == "" && (req.GetManifest() == "" || jobflags.ManifestNamespace(req.GetManifest()) == "") {
		req.Namespace = c.Namespace
	}
	res, err := c.Schedules.CreateCronTrainJob(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	io, cj := o.Factory.IO, res.Msg.GetCronTrainJob()
	printer.Warnings(io, res.Msg.GetWarnings())
	if o.Job.DryRun {
		return printer.DryRun(io.Out, format, res.Msg.GetManifest(), cj.GetName())
	}
	if printed, err := format.Print(io.Out, cj); printed {
		return err
	}
	verb := "created"
	if res.Msg.GetReplayed() {
		verb = "already created by this request"
	}
	_, err = fmt.Fprintf(io.Out, "crontrainjob %s/%s %s\n", cj.GetNamespace(), cj.GetName(), verb)
	if err == nil && io.IsTTY() {
		fmt.Fprintln(io.ErrOut, io.Gray(printer.NextRun(cj, o.Factory.Clock.Now())+"   Its runs: kiln schedules describe "+cj.GetName()))
	}
	return err
}
