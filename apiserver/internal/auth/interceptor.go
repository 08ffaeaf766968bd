package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/kiln-ml/kiln/api/authn"
)

// Interceptor authenticates every call from its bearer token and puts the caller's
// identity in the call's context. Calls without a valid token never reach a handler.
type Interceptor struct {
	Authenticator Authenticator
	// ExtraKeys are the user extras passed on to Kubernetes (impersonation and access
	// reviews); others are dropped. Impersonating an extra needs an RBAC grant per key
	// (userextras/<key>), and RBAC itself never reads extras.
	ExtraKeys []string
}

var _ connect.Interceptor = (*Interceptor)(nil)

func (i *Interceptor) authenticate(ctx context.Context, header http.Header) (context.Context, error) {
	token := authn.BearerToken(header.Get("Authorization"))
	if token == "" {
		return ctx, connect.NewError(connect.CodeUnauthenticated,
			errors.New("no bearer token: send `Authorization: Bearer <token>` (a Kubernetes ServiceAccount or OIDC token; `kiln config set-context --token`)"))
	}
	id, err := i.Authenticator.Authenticate(ctx, token)
	if errors.Is(err, ErrUnauthenticated) {
		return ctx, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("%w: get a new token", err))
	}
	if err != nil {
		return ctx, connect.NewError(connect.CodeUnavailable, fmt.Errorf("authenticating the caller: %w", err))
	}
	id = id.withExtras(i.ExtraKeys)
	if r, ok := ctx.Value(recorderKey{}).(*Recorder); ok {
		r.ID = id
	}
	return WithIdentity(ctx, id), nil
}

// Authenticate authenticates a plain HTTP request (the metrics endpoint) as the interceptor
// does a call: the returned context carries the caller; the error is a Connect error.
func (i *Interceptor) Authenticate(ctx context.Context, header http.Header) (context.Context, error) {
	return i.authenticate(ctx, header)
}

// WrapUnary implements connect.Interceptor.
func (i *Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, err := i.authenticate(ctx, req.Header())
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient implements connect.Interceptor.
func (i *Interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (i *Interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.authenticate(ctx, conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
