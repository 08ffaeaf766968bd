package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/api/clientconfig"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// badRequest is one entry of testdata/bad-requests.yaml.
type badRequest struct {
	Name string `json:"name"`
	API  *struct {
		Service string         `json:"service"`
		Method  string         `json:"method"`
		Stream  bool           `json:"stream"`
		Request map[string]any `json:"request"`
	} `json:"api"`
	CLI    []string `json:"cli"`
	Python string   `json:"python"`
	Code   string   `json:"code"`
	Field  string   `json:"field"`
	Exit   int      `json:"exit"`
	Error  string   `json:"error"`
	Want   string   `json:"want"`
}

// connectError is what a Connect call answered: its code, message and field violations.
type connectError struct {
	code, message string
	fields        []string
}

// callConnect sends req to the API server in Connect's JSON, as any client would, and
// returns the error it answered (nil for a success).
func callConnect(ctx context.Context, hc *http.Client, server, service, method string, stream bool, req map[string]any) (*connectError, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	contentType := "application/json"
	if stream {
		contentType = "application/connect+json"
		body = append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body))), body...)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/"+service+"/"+method, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", contentType)
	hreq.Header.Set("Connect-Protocol-Version", "1")
	resp, err := hc.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var wire struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	switch {
	case !stream && resp.StatusCode == http.StatusOK:
		return nil, nil
	case !stream:
		if err := json.Unmarshal(data, &wire); err != nil {
			return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
		}
	default:
		// The last envelope (flag 2) ends the stream, with its error if any.
		for len(data) >= 5 {
			flags, n := data[0], binary.BigEndian.Uint32(data[1:5])
			payload := data[5 : 5+n]
			data = data[5+n:]
			if flags&2 != 0 {
				var end struct {
					Error *json.RawMessage `json:"error"`
				}
				if err := json.Unmarshal(payload, &end); err != nil {
					return nil, err
				}
				if end.Error == nil {
					return nil, nil
				}
				if err := json.Unmarshal(*end.Error, &wire); err != nil {
					return nil, err
				}
			}
		}
	}
	out := &connectError{code: wire.Code, message: wire.Message}
	for _, d := range wire.Details {
		if d.Type != "google.rpc.BadRequest" {
			continue
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			return nil, err
		}
		br := &errdetails.BadRequest{}
		if err := proto.Unmarshal(raw, br); err != nil {
			return nil, err
		}
		for _, fv := range br.GetFieldViolations() {
			out.fields = append(out.fields, fv.GetField())
		}
	}
	return out, nil
}

// pythonHarness runs each entry's call on one kiln.TrainerClient and prints, per entry, the
// exception it raised as a JSON line.
const pythonHarness = `
import json, sys, kiln
client = kiln.TrainerClient()
for e in json.load(sys.stdin):
    try:
        eval(e["python"], {"kiln": kiln, "client": client})
        print(json.dumps({"name": e["name"], "error": None}))
    except Exception as x:
        print(json.dumps({"name": e["name"], "error": type(x).__name__, "message": str(x)}))
`

// Serial: it checks that the default queue's usage never rises, which other specs' jobs
// in that queue would make it do.
var _ = Describe("Bad requests through the API, the CLI and the Python SDK", Label(chartMode), Serial, func() {
	It("are each refused naming the field, flag or parameter, and leave no job, workload or quota behind", func(ctx SpecContext) {
		root, config := os.Getenv("KILN_ROOT"), os.Getenv("KILN_CONFIG")
		if root == "" || config == "" {
			Skip("KILN_ROOT and KILN_CONFIG are not set: not on the local platform")
		}
		data, err := os.ReadFile(filepath.Join("testdata", "bad-requests.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var entries []badRequest
		Expect(yaml.UnmarshalStrict(data, &entries)).To(Succeed())
		Expect(len(entries)).To(BeNumerically(">=", 50))

		cfg, err := clientconfig.Load(config)
		Expect(err).NotTo(HaveOccurred())
		kc, err := cfg.Resolve()
		Expect(err).NotTo(HaveOccurred())
		hc, err := kc.AuthenticatedClient()
		Expect(err).NotTo(HaveOccurred())
		queueBefore := localQueueUsage(ctx, "default", "default")

		var failures []string
		var python []badRequest
		for _, e := range entries {
			Expect(e.Want != "" || e.Field != "").To(BeTrue(), "%s says what the refusal must name", e.Name)
			switch {
			case e.API != nil:
				service := e.API.Service
				if service == "" {
					service = "kiln.v1.TrainJobService"
				}
				got, err := callConnect(ctx, hc, kc.Server, service, e.API.Method, e.API.Stream, e.API.Request)
				switch {
				case err != nil:
					failures = append(failures, fmt.Sprintf("%s: %v", e.Name, err))
				case got == nil:
					failures = append(failures, e.Name+": accepted")
				case got.code != e.Code:
					failures = append(failures, fmt.Sprintf("%s: code %s, want %s (%s)", e.Name, got.code, e.Code, got.message))
				case e.Field != "" && !slices.Contains(got.fields, e.Field):
					failures = append(failures, fmt.Sprintf("%s: field violations %q do not name %s (%s)", e.Name, got.fields, e.Field, got.message))
				case !strings.Contains(got.message, e.Want):
					failures = append(failures, fmt.Sprintf("%s: %q does not say %q", e.Name, got.message, e.Want))
				}
			case e.CLI != nil:
				_, errOut, code := kilnCLI("", e.CLI...)
				if code != e.Exit || !strings.Contains(errOut, e.Want) {
					failures = append(failures, fmt.Sprintf("%s: exit %d, want %d; %q does not say %q", e.Name, code, e.Exit, errOut, e.Want))
				}
			case e.Python != "":
				python = append(python, e)
			default:
				failures = append(failures, e.Name+": no api, cli or python")
			}
		}

		in, err := json.Marshal(python)
		Expect(err).NotTo(HaveOccurred())
		cmd := exec.CommandContext(ctx, "python3", "-c", pythonHarness)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "sdk-gen", "python"))
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred(), "the Python harness: %s", out)
		results := map[string]struct{ Error, Message string }{}
		for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
			var r struct{ Name, Error, Message string }
			Expect(json.Unmarshal(sc.Bytes(), &r)).To(Succeed())
			results[r.Name] = struct{ Error, Message string }{r.Error, r.Message}
		}
		for _, e := range python {
			r, ok := results[e.Name]
			if !ok || r.Error != e.Error || !strings.Contains(r.Message, e.Want) {
				failures = append(failures, fmt.Sprintf("%s: raised %s %q, want %s saying %q", e.Name, r.Error, r.Message, e.Error, e.Want))
			}
		}
		Expect(failures).To(BeEmpty())

		// Nothing half-created: no TrainJob or CronTrainJob, no Kueue workload of one, the queue's usage as before.
		jobs := &trainer.TrainJobList{}
		Expect(k8s.List(ctx, jobs, client.InNamespace("default"))).To(Succeed())
		for _, j := range jobs.Items {
			Expect(j.Name).NotTo(HavePrefix("bad-"), "a refused request left TrainJob %s", j.Name)
		}
		crons := &kiln.CronTrainJobList{}
		Expect(k8s.List(ctx, crons, client.InNamespace("default"))).To(Succeed())
		for _, c := range crons.Items {
			Expect(c.Name).NotTo(HavePrefix("bad-"), "a refused request left CronTrainJob %s", c.Name)
		}
		workloads := &unstructured.UnstructuredList{}
		workloads.SetGroupVersionKind(platform.WorkloadGVK.GroupVersion().WithKind("WorkloadList"))
		Expect(k8s.List(ctx, workloads, client.InNamespace("default"))).To(Succeed())
		for _, w := range workloads.Items {
			Expect(w.GetName()).NotTo(ContainSubstring("-bad-"), "a refused request left Kueue workload %s", w.GetName())
		}
		// No more quota in use than before. (Less is fine: a job an earlier spec deleted may
		// release its quota meanwhile; a refused request's own workload is caught above.)
		after := localQueueUsage(ctx, "default", "default")
		for i := range after {
			Expect(after[i]).To(BeNumerically("<=", queueBefore[i]), "LocalQueue default's pending/reserving/admitted workloads: %v before, %v after", queueBefore, after)
		}
	})
})

// localQueueUsage is a LocalQueue's pending, reserving and admitted workload counts.
func localQueueUsage(ctx context.Context, namespace, name string) [3]int64 {
	GinkgoHelper()
	lq := platform.UnstructuredOf(platform.WorkloadGVK.GroupVersion().WithKind("LocalQueue"))
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, lq)).To(Succeed())
	var out [3]int64
	for i, f := range []string{"pendingWorkloads", "reservingWorkloads", "admittedWorkloads"} {
		out[i], _, _ = unstructured.NestedInt64(lq.Object, "status", f)
	}
	return out
}
