package integration

import (
	"errors"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
)

// protocol is one of the wire protocols the server speaks.
type protocol struct {
	name string
	opts []connect.ClientOption
}

var protocols = []protocol{
	{name: "Connect"},
	{name: "gRPC", opts: []connect.ClientOption{connect.WithGRPC()}},
	{name: "gRPC-Web", opts: []connect.ClientOption{connect.WithGRPCWeb()}},
}

// prefix makes names unique per protocol.
func (p protocol) prefix() string {
	return strings.ToLower(strings.ReplaceAll(p.name, "-", "")) + "-"
}

type clients struct {
	jobs     kilnv1connect.TrainJobServiceClient
	runtimes kilnv1connect.RuntimeServiceClient
	queues   kilnv1connect.QueueServiceClient
	server   kilnv1connect.ServerServiceClient
	crons    kilnv1connect.CronTrainJobServiceClient
}

// as returns the clients of user (a name in tokens; "" sends no token).
func (p protocol) as(user string) clients {
	hc := httpClientFor(tokens[user])
	return clients{
		jobs:     kilnv1connect.NewTrainJobServiceClient(hc, apiURL, p.opts...),
		runtimes: kilnv1connect.NewRuntimeServiceClient(hc, apiURL, p.opts...),
		queues:   kilnv1connect.NewQueueServiceClient(hc, apiURL, p.opts...),
		server:   kilnv1connect.NewServerServiceClient(hc, apiURL, p.opts...),
		crons:    kilnv1connect.NewCronTrainJobServiceClient(hc, apiURL, p.opts...),
	}
}

// fieldViolations lists the fields a BadRequest detail of err names.
func fieldViolations(err error) []string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	var out []string
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if br, ok := v.(*errdetails.BadRequest); ok && derr == nil {
			for _, fv := range br.GetFieldViolations() {
				out = append(out, fv.GetField())
			}
		}
	}
	return out
}
