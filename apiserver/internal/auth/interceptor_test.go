package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// A caller without a valid token is refused as unauthenticated before its body is read:
// a body over the server's limit would otherwise be answered resource_exhausted, after
// reading it. A valid caller's call is read and answered as usual.
func TestUnauthenticatedCallsAreRefusedBeforeTheirBodyIsRead(t *testing.T) {
	i := &Interceptor{Authenticator: &countingAuth{users: map[string]string{"good": "alice"}}}
	var served []string
	h := connect.NewUnaryHandler("/test.v1.Echo/Call",
		func(ctx context.Context, req *connect.Request[kilnv1.GetTrainJobRequest]) (*connect.Response[kilnv1.GetTrainJobRequest], error) {
			served = append(served, FromContext(ctx).User)
			return connect.NewResponse(&kilnv1.GetTrainJobRequest{Name: req.Msg.Name[:1]}), nil
		},
		connect.WithInterceptors(i), connect.WithReadMaxBytes(1<<20))
	mux := http.NewServeMux()
	mux.Handle("/test.v1.Echo/Call", i.BeforeBody(h))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	big := &kilnv1.GetTrainJobRequest{Name: strings.Repeat("x", 3<<20)}
	for name, opts := range map[string][]connect.ClientOption{
		"connect, json": {connect.WithProtoJSON()}, "connect, proto": nil,
		"grpc": {connect.WithGRPC()}, "grpc-web": {connect.WithGRPCWeb()},
	} {
		t.Run(name, func(t *testing.T) {
			c := connect.NewClient[kilnv1.GetTrainJobRequest, kilnv1.GetTrainJobRequest](srv.Client(), srv.URL+"/test.v1.Echo/Call", opts...)
			for token, want := range map[string]connect.Code{"": connect.CodeUnauthenticated, "bad": connect.CodeUnauthenticated} {
				req := connect.NewRequest(big)
				if token != "" {
					req.Header().Set("Authorization", "Bearer "+token)
				}
				_, err := c.CallUnary(t.Context(), req)
				var ce *connect.Error
				if !errors.As(err, &ce) || ce.Code() != want {
					t.Errorf("token %q: %v, want %s", token, err, want)
				}
			}
			req := connect.NewRequest(&kilnv1.GetTrainJobRequest{Name: "hello"})
			req.Header().Set("Authorization", "Bearer good")
			res, err := c.CallUnary(t.Context(), req)
			if err != nil || res.Msg.Name != "h" {
				t.Errorf("an authenticated call: %v, %v", res, err)
			}
		})
	}
	if len(served) != 4 || served[0] != "alice" {
		t.Errorf("the handler served %v, want alice's four calls only", served)
	}
}
