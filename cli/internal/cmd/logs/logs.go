// Package logs is `kiln logs`: a job's logs, optionally followed.
package logs

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/jobs"
)

// Options are what `kiln logs` was asked.
type Options struct {
	Factory    *factory.Factory
	Name       string
	Follow     bool
	Step       string
	Container  string
	Tail       int64
	Since      time.Duration
	Timestamps bool
	// Attempt is --attempt (-1: the pods of now); Previous is --previous.
	Attempt  int32
	Previous bool
}

// NewCmdLogs returns the command; runF replaces its run in tests.
func NewCmdLogs(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print a training job's logs",
		Long: `Print the logs of a job's steps (its pods: node-0, node-1, launcher-0, dataset-initializer-0, ...),
each line after its step unless --step picks one. With -f, follow the steps as they start and run,
until the job finished; after a restart, the lines of a later attempt say which.

A pod that is deleted (a group restart, a preemption or eviction, a suspension, the deadline) takes
its log with it, and with it the lines that say why it stopped. Kiln keeps the last MiB of each such
pod's log with the job (of its newest attempts): --previous prints the attempt before the pods of
now, --attempt N the attempt N (from 0).`,
		Example: `  kiln logs mnist
  kiln logs mnist -f --step node-0
  kiln logs mnist --tail 20 --since 10m
  # what the pods said before the last restart, e.g. their SIGTERM and emergency checkpoint
  kiln logs mnist --previous
  kiln logs mnist --attempt 0 --step node-1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if !cmd.Flags().Changed("tail") {
				o.Tail = -1
			}
			if !cmd.Flags().Changed("attempt") {
				o.Attempt = -1
			} else if o.Attempt < 0 {
				return factory.Usagef("--attempt %d: want 0 or more (the first attempt is 0)", o.Attempt)
			}
			return factory.Run(cmd.Context(), o, runF, run)
		},
	}
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "follow the logs until the job finished")
	cmd.Flags().StringVar(&o.Step, "step", "", "only this step, e.g. node-0")
	cmd.Flags().StringVarP(&o.Container, "container", "c", "", "container of the step (default: its training or initializer container)")
	cmd.Flags().Int64Var(&o.Tail, "tail", -1, "only the last lines of each step")
	cmd.Flags().DurationVar(&o.Since, "since", 0, "only lines newer than this, e.g. 10m")
	cmd.Flags().BoolVar(&o.Timestamps, "timestamps", false, "print each line's time")
	cmd.Flags().Int32Var(&o.Attempt, "attempt", 0, "the kept logs of this earlier attempt (JobSet's restart attempt, from 0)")
	cmd.Flags().BoolVar(&o.Previous, "previous", false, "the kept logs of the attempt before the pods of now")
	return cmd
}

func run(ctx context.Context, o *Options) error {
	if o.Tail < -1 {
		return factory.Usagef("--tail %d: want 0 or more", o.Tail)
	}
	if o.Since < 0 || (o.Since > 0 && o.Since < time.Second) {
		return factory.Usagef("--since %s: want at least 1s", o.Since)
	}
	kept := o.Attempt >= 0 || o.Previous
	switch {
	case o.Attempt >= 0 && o.Previous:
		return factory.Usagef("--attempt and --previous: give one")
	case kept && o.Follow:
		return factory.Usagef("--follow with --attempt or --previous: an earlier attempt's log is complete, there is nothing to follow")
	case kept && (o.Since > 0 || o.Timestamps):
		return factory.Usagef("--since and --timestamps read the pods of now: an earlier attempt's kept log has no times")
	}
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	lo := jobs.LogOptions{Step: o.Step, Container: o.Container, Follow: o.Follow, Since: o.Since, Timestamps: o.Timestamps, Prefix: o.Step == "", Previous: o.Previous}
	if o.Attempt >= 0 {
		lo.Attempt = &o.Attempt
	}
	if o.Tail >= 0 {
		lo.Tail = &o.Tail
	}
	return jobs.StreamLogs(ctx, c.Jobs, o.Factory.IO, c.Namespace, o.Name, lo)
}
