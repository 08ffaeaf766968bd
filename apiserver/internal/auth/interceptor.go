package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

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
	// Decided already, before the request's body was read (BeforeBody).
	if v, ok := ctx.Value(verdictKey{}).(verdict); ok {
		if v.err == nil {
			i.record(ctx, v.id)
		}
		return ctx, v.err
	}
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
	i.record(ctx, id)
	return WithIdentity(ctx, id), nil
}

// record tells the call's log and metrics who called.
func (i *Interceptor) record(ctx context.Context, id *Identity) {
	if r, ok := ctx.Value(recorderKey{}).(*Recorder); ok {
		r.ID = id
	}
}

// verdictKey holds BeforeBody's verdict in a request's context.
type verdictKey struct{}

type verdict struct {
	id  *Identity
	err error
}

// BeforeBody authenticates each call before its body is read, so that an unauthenticated
// caller costs no decoding of a large message: its body is replaced by an empty request
// of its protocol, which the interceptor then refuses with the verdict (logged and counted
// as every call is). Requests that are no calls (the console, health) pass as they are.
func (i *Interceptor) BeforeBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		empty, isCall := emptyRequest(r)
		if !isCall {
			next.ServeHTTP(w, r)
			return
		}
		ctx, err := i.authenticate(r.Context(), r.Header)
		if err != nil {
			r.Body = io.NopCloser(bytes.NewReader(empty))
			r.ContentLength = int64(len(empty))
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, verdictKey{}, verdict{id: FromContext(ctx), err: err})))
	})
}

// emptyRequest is an empty request message of r's protocol when r is a unary call by POST
// (streams are authenticated before any message is read, GETs have no body).
func emptyRequest(r *http.Request) (body []byte, isCall bool) {
	if r.Method != http.MethodPost {
		return nil, false
	}
	ct := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/grpc-web-text"): // base64 of the envelope below
		return []byte("AAAAAAA="), true
	case strings.HasPrefix(ct, "application/grpc"): // gRPC and gRPC-Web: one enveloped, empty message
		return []byte{0, 0, 0, 0, 0}, true
	case ct == "application/json" || strings.HasPrefix(ct, "application/json;"):
		return []byte("{}"), true
	case ct == "application/proto":
		return nil, true
	}
	return nil, false
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
