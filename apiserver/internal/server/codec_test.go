package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// What the API does not have is refused with its name, not dropped; what it has decodes as
// with Connect's own codec.
func TestStrictJSON(t *testing.T) {
	c := jsonCodecs[0]
	for name, tc := range map[string]struct {
		body    string
		msg     proto.Message
		wantErr string
	}{
		"an unknown field":        {body: `{"namespace": "team", "hostNetwork": true}`, msg: &kilnv1.CreateTrainJobRequest{}, wantErr: `unknown field "hostNetwork"`},
		"an unknown enum value":   {body: `{"name": "torch", "kind": "RUNTIME_KIND_BOGUS"}`, msg: &kilnv1.GetRuntimeRequest{}, wantErr: `RUNTIME_KIND_BOGUS`},
		"nothing":                 {body: ``, msg: &kilnv1.GetRuntimeRequest{}, wantErr: "zero-length payload"},
		"a request as it is":      {body: `{"name": "torch", "kind": "RUNTIME_KIND_CLUSTER"}`, msg: &kilnv1.GetRuntimeRequest{}},
		"proto names, and camels": {body: `{"page_size": 5, "labelSelector": "a=b"}`, msg: &kilnv1.ListTrainJobsRequest{}},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.Unmarshal([]byte(tc.body), tc.msg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("err = %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
	got := &kilnv1.GetRuntimeRequest{}
	if err := c.Unmarshal([]byte(`{"name": "torch", "kind": "RUNTIME_KIND_CLUSTER"}`), got); err != nil || got.GetName() != "torch" || got.GetKind() != kilnv1.RuntimeKind_RUNTIME_KIND_CLUSTER {
		t.Errorf("decoded %v, %v", got, err)
	}
}

// The SDKs' requests, as recorded from a real server, decode strictly: the codec refuses
// nothing a Kiln client sends.
func TestStrictJSONReadsTheSDKsRequests(t *testing.T) {
	files, err := filepath.Glob("../../../sdk-gen/testdata/wire/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded exchanges: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ex struct {
			Request struct {
				Path string          `json:"path"`
				Body json.RawMessage `json:"body"`
			} `json:"request"`
		}
		if err := json.Unmarshal(data, &ex); err != nil {
			t.Fatal(err)
		}
		svc, method, _ := strings.Cut(strings.TrimPrefix(ex.Request.Path, "/"), "/")
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		in := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method)).Input()
		mt, err := protoregistry.GlobalTypes.FindMessageByName(in.FullName())
		if err != nil {
			t.Fatal(err)
		}
		if err := jsonCodecs[0].Unmarshal(ex.Request.Body, mt.New().Interface()); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
	}
}
