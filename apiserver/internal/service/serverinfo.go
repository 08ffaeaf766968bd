package service

import (
	"context"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
	"github.com/kiln-ml/kiln/api/version"
	"github.com/kiln-ml/kiln/apiserver/internal/auth"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
)

// ServerInfo implements kilnv1connect.ServerServiceHandler.
type ServerInfo struct {
	kube *kube.Clients
}

var _ kilnv1connect.ServerServiceHandler = (*ServerInfo)(nil)

// NewServerInfo describes the server and its cluster.
func NewServerInfo(k *kube.Clients) *ServerInfo { return &ServerInfo{kube: k} }

// GetServerInfo implements kilnv1connect.ServerServiceHandler.
func (s *ServerInfo) GetServerInfo(ctx context.Context, _ *connect.Request[kilnv1.GetServerInfoRequest]) (*connect.Response[kilnv1.GetServerInfoResponse], error) {
	res := &kilnv1.GetServerInfoResponse{Version: version.Version, KubernetesVersion: s.kube.KubernetesVersion, Kueue: s.kube.Kueue()}
	if id := auth.FromContext(ctx); id != nil {
		res.User, res.Groups = id.User, id.Groups
	}
	return connect.NewResponse(res), nil
}
