package jobs

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

// SetSuspended suspends a job (suspend) or resumes it, and says so: "trainjob NS/NAME
// suspended" (or resumed) on standard output and, on a terminal, the job's summary as of
// now() on standard error. `kiln suspend` and `kiln resume` are this one call.
func SetSuspended(ctx context.Context, c kilnv1connect.TrainJobServiceClient, io *iostreams.IOStreams, now func() time.Time,
	namespace, name string, suspend bool) error {
	var j *kilnv1.TrainJob
	verb := "suspended"
	if suspend {
		res, err := c.SuspendTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendTrainJobRequest{Namespace: namespace, Name: name}))
		if err != nil {
			return err
		}
		j = res.Msg.GetTrainJob()
	} else {
		res, err := c.ResumeTrainJob(ctx, connect.NewRequest(&kilnv1.ResumeTrainJobRequest{Namespace: namespace, Name: name}))
		if err != nil {
			return err
		}
		j, verb = res.Msg.GetTrainJob(), "resumed"
	}
	fmt.Fprintf(io.Out, "trainjob %s/%s %s\n", j.GetNamespace(), j.GetName(), verb)
	if io.IsTTY() {
		fmt.Fprintln(io.ErrOut, io.Gray(Summary(io, j, now())))
	}
	return nil
}
