// Package convert is `kiln convert`: what a team runs today (Training Operator v1
// PyTorchJobs, batch Jobs and CronJobs, TrainJobs of the v2alpha1 draft) as TrainJobs and
// CronTrainJobs, converted by the API server; the manifests go to standard output, what
// did not carry over to standard error.
package convert

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln convert` was asked.
type Options struct {
	Factory *factory.Factory
	File    string
	Runtime string
	// Quiet leaves the notes out (warnings are always printed).
	Quiet bool
}

// NewCmdConvert returns the command; runF replaces its run in tests.
func NewCmdConvert(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "convert -f FILE",
		Short: "Convert PyTorchJobs, Jobs, CronJobs and v2alpha1 TrainJobs into TrainJobs",
		Long: `Convert what you run today into Kiln's kinds, creating nothing: Training Operator v1 PyTorchJobs
(kubeflow.org/v1), batch/v1 Jobs and CronJobs, and TrainJobs of the early v2alpha1 draft become TrainJobs and
CronTrainJobs on a catalog runtime. The manifests go to standard output, ready for kubectl apply or
kiln submit -f; each source field that did not carry over is a warning on standard error, naming it, and
each change made (a torchrun flag removed, a variable set) a note.`,
		Example: `  kiln convert -f pytorchjob.yaml > trainjob.yaml
  kiln convert -f jobs.yaml --runtime torch-distributed-spot -n team-nlp
  kubectl get pytorchjob mnist -o yaml | kiln convert -f - | kubectl apply -f -`,
		Args: cobra.NoArgs,
		RunE: factory.RunE(o, runF, run),
	}
	cmd.Flags().StringVarP(&o.File, "filename", "f", "", `the manifests to convert ("-" for standard input)`)
	cmd.Flags().StringVar(&o.Runtime, "runtime", "", "the ClusterTrainingRuntime the results run on (default torch-distributed)")
	cmd.Flags().BoolVarP(&o.Quiet, "quiet", "q", false, "leave the notes out (warnings are always printed)")
	return cmd
}

func run(ctx context.Context, o *Options) error {
	if o.File == "" {
		return factory.Usagef("-f FILE: give the manifests to convert (\"-\" for standard input)")
	}
	data, err := o.Factory.ReadFile(o.File)
	if err != nil {
		return fmt.Errorf("reading the manifests: %w", err)
	}
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	res, err := c.Jobs.ConvertManifests(ctx, connect.NewRequest(&kilnv1.ConvertManifestsRequest{
		Manifests: string(data), Runtime: o.Runtime, Namespace: o.Factory.Namespace,
	}))
	if err != nil {
		return err
	}
	out, errOut := o.Factory.IO.Out, o.Factory.IO.ErrOut
	for i, m := range res.Msg.GetManifests() {
		if i > 0 {
			fmt.Fprintln(out, "---")
		}
		fmt.Fprintf(out, "# %s %s, converted from %s\n", m.GetKind(), m.GetName(), m.GetSource())
		fmt.Fprint(out, m.GetManifest())
	}
	printer.ConversionWarnings(errOut, res.Msg.GetWarnings(), o.Quiet)
	return nil
}
