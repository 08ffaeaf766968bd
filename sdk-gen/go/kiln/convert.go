package kiln

import (
	"context"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// ConvertOptions shape a conversion.
type ConvertOptions struct {
	// Runtime is the ClusterTrainingRuntime the results run on (default torch-distributed).
	Runtime string
	// Namespace, when set, replaces the sources' namespace.
	Namespace string
}

// Convert converts PyTorchJobs (kubeflow.org/v1), batch Jobs and CronJobs, and TrainJobs
// of the v2alpha1 draft (manifests: YAML or JSON, several documents allowed) into
// TrainJob and CronTrainJob manifests, creating nothing. The warnings name each source
// field that did not carry over; the notes (Note set) what carried over in another form.
func (c *Client) Convert(ctx context.Context, manifests string, o ConvertOptions) (*kilnv1.ConvertManifestsResponse, error) {
	var res *connect.Response[kilnv1.ConvertManifestsResponse]
	err := retry(ctx, func() (err error) {
		res, err = c.Jobs.ConvertManifests(ctx, connect.NewRequest(&kilnv1.ConvertManifestsRequest{Manifests: manifests, Runtime: o.Runtime, Namespace: o.Namespace}))
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	return res.Msg, nil
}
