package e2e

import (
	"cmp"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// receivedSpan is a span as an OTLP receiver got it, with its service's name.
type receivedSpan struct {
	service, name       string
	traceID, id, parent string
	attrs               map[string]string
	events              []string
	start               uint64
}

// otlpReceiver is a real OTLP/HTTP receiver (protobuf, as the Go exporters send by default)
// in the test process: the operator and the API server of the local platform export to it
// (platform.Config.OTLPPort), and so does the CLI the spec runs.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
}

func startOTLPReceiver(addr string) *otlpReceiver {
	GinkgoHelper()
	r := &otlpReceiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		body, err := readBody(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		msg := &collectortrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(msg)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	// The API server also exports its RPC metrics; they are not what this spec checks.
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
	})
	ln, err := net.Listen("tcp", addr)
	Expect(err).NotTo(HaveOccurred(), "listening on the platform's OTLP address %s", addr)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	DeferCleanup(func(ctx context.Context) { _ = srv.Shutdown(ctx) })
	return r
}

func readBody(req *http.Request) ([]byte, error) {
	var rd io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, err
		}
		rd = gz
	}
	return io.ReadAll(rd)
}

func (r *otlpReceiver) add(msg *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, toReceived(service, s))
			}
		}
	}
}

func toReceived(service string, s *tracepb.Span) receivedSpan {
	out := receivedSpan{service: service, name: s.GetName(), traceID: hex.EncodeToString(s.GetTraceId()),
		id: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId()), attrs: map[string]string{}, start: s.GetStartTimeUnixNano()}
	for _, kv := range s.GetAttributes() {
		out.attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	for _, e := range s.GetEvents() {
		out.events = append(out.events, e.GetName())
	}
	return out
}

// trace is every span received of a trace.
func (r *otlpReceiver) trace(id string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.traceID == id {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b receivedSpan) int { return cmp.Compare(a.start, b.start) })
	return out
}

func (r *otlpReceiver) find(match func(receivedSpan) bool) (receivedSpan, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if match(s) {
			return s, true
		}
	}
	return receivedSpan{}, false
}

// ancestors follows a span's parents within its trace, up to the root.
func ancestors(spans []receivedSpan, s receivedSpan) []receivedSpan {
	byID := map[string]receivedSpan{}
	for _, x := range spans {
		byID[x.id] = x
	}
	var out []receivedSpan
	for seen := 0; s.parent != "" && seen < len(spans); seen++ {
		p, ok := byID[s.parent]
		if !ok {
			break
		}
		out = append(out, p)
		s = p
	}
	return out
}

var _ = Describe("Tracing", func() {
	It("follows a job in one trace, from `kiln submit` through the API server and the operator to its completion", func(ctx SpecContext) {
		if os.Getenv(platform.EnvInstall) == string(platform.InstallChart) || os.Getenv("KILN_ROOT") == "" {
			Skip("the chart's pods cannot reach a receiver in the test process: the spec runs with KILN_INSTALL=processes")
		}
		cfg := platform.DefaultConfig(os.Getenv("KILN_ROOT"))
		recv := startOTLPReceiver(fmt.Sprintf("127.0.0.1:%d", cfg.OTLPPort))
		name := fmt.Sprintf("traced-%d", time.Now().UnixNano()%100000)
		DeferCleanup(func() { _, _, _ = kilnCLI("", "delete", name) })

		By("submitting a queued job with the CLI exporting its spans, and waiting for it")
		env := []string{fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", cfg.OTLPPort)}
		// Its pod runs 10 s: long enough that the operator sees it running on a loaded machine
		// (with the platform's short default, a job can go from starting to complete between
		// two of its reconciles).
		manifest := fmt.Sprintf(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: %s}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {numNodes: 1, command: [torchrun, train.py], resourcesPerNode: {limits: {nvidia.com/gpu: 1}}}
  runtimePatches:
  - manager: e2e.kiln.dev/simulation
    trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {metadata: {annotations: {%s: 10s}}}}}}]}}}
`, name, platform.AnnotationSimDuration)
		_, errOut, code := kilnCLIWith(env, manifest, "submit", "-f", "-", "--queue", "default", "--wait", "--timeout", "3m")
		Expect(code).To(Equal(0), errOut)

		By("finding the CLI's root span, and in its trace the API server's and the operator's")
		var root receivedSpan
		Eventually(ctx, func() bool {
			var ok bool
			root, ok = recv.find(func(s receivedSpan) bool { return s.service == "kiln-cli" && s.name == "kiln submit" && s.parent == "" })
			return ok
		}).Should(BeTrue(), "the CLI exported its root span")
		var spans []receivedSpan
		Eventually(ctx, func(g Gomega) {
			spans = recv.trace(root.traceID)
			var operatorStates []string
			for _, s := range spans {
				if s.service == "kiln-operator" && s.attrs["kiln.trainjob.name"] == name {
					operatorStates = append(operatorStates, s.attrs["kiln.trainjob.state"])
				}
			}
			g.Expect(operatorStates).To(ContainElements("queued", "starting", "running", "complete"), "the operator's spans of the job's states, in the submit's trace")
		}).WithTimeout(30 * time.Second).Should(Succeed())

		create, ok := findIn(spans, func(s receivedSpan) bool {
			return s.service == "kiln-apiserver" && s.name == "kiln.v1.TrainJobService/CreateTrainJob"
		})
		Expect(ok).To(BeTrue(), "the API server's CreateTrainJob span is in the trace: %v", names(spans))
		Expect(ids(ancestors(spans, create))).To(ContainElement(root.id), "CreateTrainJob descends from the CLI's span")
		_, ok = findIn(spans, func(s receivedSpan) bool {
			return s.service == "kiln-apiserver" && s.name == "kubernetes POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
		})
		Expect(ok).To(BeTrue(), "the API server's Kubernetes call is in the trace: %v", names(spans))
		complete, _ := findIn(spans, func(s receivedSpan) bool {
			return s.service == "kiln-operator" && s.attrs["kiln.trainjob.state"] == "complete"
		})
		Expect(ids(ancestors(spans, complete))).To(ContainElement(create.id), "the operator's spans continue the CreateTrainJob span (the job's kiln.dev/traceparent)")
		Expect(complete.events).To(ContainElement("Completed"), "the span carries the job's event")
		_, ok = findIn(spans, func(s receivedSpan) bool { return s.service == "kiln-operator" && s.name == "create JobSet" })
		Expect(ok).To(BeTrue(), "the JobSet's creation is a span: %v", names(spans))
		AddReportEntry("trace", fmt.Sprintf("trace %s, %d spans:\n%s", root.traceID, len(spans), tree(spans, root, "")))
	})
})

func findIn(spans []receivedSpan, match func(receivedSpan) bool) (receivedSpan, bool) {
	for _, s := range spans {
		if match(s) {
			return s, true
		}
	}
	return receivedSpan{}, false
}

func names(spans []receivedSpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.service+": "+s.name)
	}
	return out
}

func ids(spans []receivedSpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.id)
	}
	return out
}

// tree prints a span and its descendants, one per line, indented by depth, children in the
// order they started (as received).
func tree(spans []receivedSpan, s receivedSpan, indent string) string {
	line := fmt.Sprintf("%-16s%s%s", s.service, indent, s.name)
	if len(s.events) > 0 {
		line = fmt.Sprintf("%-90s events: %s", line, strings.Join(s.events, ", "))
	}
	if s.attrs["error"] != "" {
		line += " error: " + s.attrs["error"]
	}
	out := line + "\n"
	for _, c := range spans {
		if c.parent == s.id {
			out += tree(spans, c, indent+"  ")
		}
	}
	return out
}
