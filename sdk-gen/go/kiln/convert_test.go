package kiln

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
)

type fakeConvert struct {
	kilnv1connect.UnimplementedTrainJobServiceHandler
	got []*kilnv1.ConvertManifestsRequest
}

func (f *fakeConvert) ConvertManifests(_ context.Context, req *connect.Request[kilnv1.ConvertManifestsRequest]) (*connect.Response[kilnv1.ConvertManifestsResponse], error) {
	f.got = append(f.got, req.Msg)
	if len(f.got) == 1 {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("restarting"))
	}
	return connect.NewResponse(&kilnv1.ConvertManifestsResponse{
		Manifests: []*kilnv1.ConvertedManifest{{Kind: "TrainJob", Name: "mnist", Source: "PyTorchJob/mnist", Manifest: "kind: TrainJob\n"}},
		Warnings:  []*kilnv1.ConversionWarning{{Source: "PyTorchJob/mnist", Field: "spec.runPolicy.backoffLimit", Message: "not carried over"}},
	}), nil
}

// Convert sends the manifests with the options, is retried when the server is away (it
// creates nothing), and returns the results and warnings.
func TestConvert(t *testing.T) {
	f := &fakeConvert{}
	mux := http.NewServeMux()
	mux.Handle(kilnv1connect.NewTrainJobServiceHandler(f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(Options{Server: srv.URL, Namespace: "team-a", ConfigFile: t.TempDir() + "/none.yaml", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Convert(t.Context(), "kind: PyTorchJob\n", ConvertOptions{Runtime: "torch-distributed-spot", Namespace: "team-b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.got) != 2 || f.got[1].GetManifests() != "kind: PyTorchJob\n" || f.got[1].GetRuntime() != "torch-distributed-spot" || f.got[1].GetNamespace() != "team-b" {
		t.Errorf("requests %v", f.got)
	}
	if len(res.GetManifests()) != 1 || res.GetManifests()[0].GetName() != "mnist" || res.GetWarnings()[0].GetField() != "spec.runPolicy.backoffLimit" {
		t.Errorf("answer %v", res)
	}
}
