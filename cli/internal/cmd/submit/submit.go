// Package submit is `kiln submit`: create a training job from a manifest or from flags,
// and optionally wait for it or follow its logs.
package submit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedules/create"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/jobflags"
	"github.com/kiln-ml/kiln/cli/internal/jobs"
	"github.com/kiln-ml/kiln/cli/internal/printer"
	"github.com/kiln-ml/kiln/sdk-gen/go/kiln"
)

// Options are what `kiln submit` was asked.
type Options struct {
	Factory *factory.Factory
	// Job is the job; Schedule, when set (--schedule), makes it the runs of a schedule.
	Job      jobflags.Job
	Schedule jobflags.Schedule
}

// NewCmdSubmit returns the command; runF replaces its run in tests.
func NewCmdSubmit(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "submit [-f FILE | --runtime RUNTIME [flags]] [-- COMMAND [ARGS...]]",
		Short: "Submit a training job",
		Long: `Submit a training job: a TrainJob manifest (-f, "-" for standard input), or one described by flags
with the command to run after "--".

With -f, --name, --generate-name, --queue, --priority-class, --deadline, --ttl, --suspend and --label
change the manifest; the other job flags cannot be combined with it.

Durations (--deadline, --ttl) are like 90s, 45m, 8h or 2d. Retries of a submit are safe: the request
carries an id (--request-id, random by default), so a retried request never creates a second job.

With --schedule (a cron expression) it creates a schedule instead, a CronTrainJob named --name whose
runs are this job, as ` + "`kiln schedules create`" + ` does.`,
		Example: `  # Two nodes of 8 GPUs each, queued in Kueue, at most 8 hours, deleted a day after it finished
  kiln submit --runtime torch-distributed --image ghcr.io/me/train:v3 --nodes 2 --gpus-per-node 8 \
      --queue default --deadline 8h --ttl 24h -- torchrun train.py --epochs 3

  # A manifest, and follow its logs until it finishes
  kiln submit -f trainjob.yaml --follow

  # Retrain every Sunday at 02:00 Berlin time, never two runs at once, each run at most 12 hours
  kiln submit --schedule "0 2 * * 0" --time-zone Europe/Berlin --concurrency-policy Forbid \
      --name weekly-retrain --runtime torch-distributed --queue default --deadline 12h -- torchrun train.py

  # See the TrainJob Kubernetes would store, without creating it
  kiln submit --runtime torch-distributed --name try --dry-run -- python train.py`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() > 0 {
				return factory.Usagef("unexpected arguments before --: %s (the command to run goes after --)", strings.Join(args[:cmd.ArgsLenAtDash()], " "))
			}
			if cmd.ArgsLenAtDash() < 0 && len(args) > 0 {
				return factory.Usagef("unexpected arguments %q: put the command to run after --, e.g. kiln submit --runtime torch-distributed -- torchrun train.py", strings.Join(args, " "))
			}
			o.Job.Command = args
			for name, v := range map[string]int32{"nodes": o.Job.Nodes, "procs-per-node": o.Job.ProcsPerNode} {
				if cmd.Flags().Changed(name) && v < 1 {
					return factory.Usagef("--%s %d: at least 1 (leave --%s out for the runtime's)", name, v, name)
				}
			}
			o.Job.Changed(cmd)
			o.Schedule.Changed(cmd)
			return factory.Run(cmd.Context(), o, runF, run)
		},
	}
	o.Job.Add(cmd)
	o.Schedule.Add(cmd, false)
	return cmd
}

func run(ctx context.Context, o *Options) error {
	if o.Schedule.Set() {
		return create.Run(ctx, &create.Options{Factory: o.Factory, Job: o.Job, Schedule: o.Schedule})
	}
	if o.Job.Convert {
		if err := o.Job.ConvertFile(ctx, o.Factory); err != nil {
			return err
		}
	}
	req, err := o.Job.Request(o.Factory)
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
	// -n wins; else a manifest's own namespace; else the context's.
	if req.Namespace == "" && (o.Job.File == "" || jobflags.ManifestNamespace(req.GetManifest()) == "") {
		req.Namespace = c.Namespace
	}
	res, err := c.Jobs.CreateTrainJob(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	io, job := o.Factory.IO, res.Msg.GetTrainJob()
	printer.Warnings(io, res.Msg.GetWarnings())
	if o.Job.DryRun {
		return printer.DryRun(io.Out, format, res.Msg.GetManifest(), job.GetName())
	}
	printed, err := format.Print(io.Out, job)
	if !printed {
		verb := "created"
		if res.Msg.GetReplayed() {
			verb = "already created by this request"
		}
		_, err = fmt.Fprintf(io.Out, "trainjob %s/%s %s\n", job.GetNamespace(), job.GetName(), verb)
		if err == nil && io.IsTTY() && !o.Job.Wait && !o.Job.Follow {
			fmt.Fprintf(io.ErrOut, "%s\n", io.Gray(fmt.Sprintf("Follow it: kiln logs -f %s   Its state: kiln describe %s", job.GetName(), job.GetName())))
		}
	}
	if err != nil || (!o.Job.Wait && !o.Job.Follow) {
		return err
	}
	ctx, cancel := o.Factory.WithTimeout(ctx, o.Job.Timeout)
	defer cancel()
	if o.Job.Follow {
		err := jobs.StreamLogs(ctx, c.Jobs, io, job.GetNamespace(), job.GetName(), jobs.LogOptions{Follow: true, Prefix: true})
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	progress := &jobs.Progress{IO: io, Now: o.Factory.Clock.Now}
	final, err := c.WatchJob(ctx, job.GetNamespace(), job.GetName(), func(j *kilnv1.TrainJob) bool {
		progress.Show(j)
		return jobs.Finished(j)
	})
	progress.Done()
	if factory.TimedOut(ctx, err) {
		err = context.DeadlineExceeded
	}
	return Outcome(io.Out, io.ErrOut, final, err, o.Job.Timeout)
}

// Outcome reports how a waited-for job ended, with the CLI's exit codes.
func Outcome(out, errOut io.Writer, j *kilnv1.TrainJob, err error, timeout time.Duration) error {
	var gone *kiln.JobGoneError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || connect.CodeOf(err) == connect.CodeDeadlineExceeded:
		return &factory.ExitErr{Code: factory.ExitTimeout, Err: fmt.Errorf("timed out after %s waiting for the job", timeout)}
	case errors.As(err, &gone) && gone.Deleted:
		return errors.New("the job was deleted")
	case err != nil:
		return err
	}
	st := j.GetStatus()
	line := fmt.Sprintf("trainjob %s/%s %s", j.GetNamespace(), j.GetName(), printer.StateName(st.GetState()))
	if st.GetReason() != "" {
		line += " (" + st.GetReason() + ")"
	}
	if st.GetState() == kilnv1.State_STATE_FAILED {
		if st.GetMessage() != "" {
			line += ": " + st.GetMessage()
		}
		fmt.Fprintln(errOut, line)
		return &factory.ExitErr{Code: factory.ExitFailed}
	}
	fmt.Fprintln(out, line)
	return nil
}
