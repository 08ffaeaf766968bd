package wait

import (
	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

func connectReq(ns, name string) *connect.Request[kilnv1.DeleteTrainJobRequest] {
	return connect.NewRequest(&kilnv1.DeleteTrainJobRequest{Namespace: ns, Name: name})
}
