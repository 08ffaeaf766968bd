package kiln

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// exchange is one call recorded from a real Kiln API server (sdk-gen/testdata/record.py).
type exchange struct {
	Request struct {
		Path        string         `json:"path"`
		ContentType string         `json:"contentType"`
		Body        map[string]any `json:"body"`
	} `json:"request"`
	Response struct {
		Status      int    `json:"status"`
		ContentType string `json:"contentType"`
		BodyBase64  string `json:"bodyBase64"`
	} `json:"response"`
}

type received struct {
	path, contentType string
	body              []byte
}

// replay serves the named exchanges once each and records what it was sent; the client
// speaks Connect's JSON, as the recording did. With lose, the first request's answer is
// lost: lose drops the connections instead.
func replay(t *testing.T, lose func(net.Conn), names ...string) (*Client, *[]received) {
	t.Helper()
	var mu sync.Mutex
	var exchanges []exchange
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "wire", n+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var ex exchange
		if err := json.Unmarshal(data, &ex); err != nil {
			t.Fatal(err)
		}
		exchanges = append(exchanges, ex)
	}
	var got []received
	conns := map[net.Conn]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rd io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("gzip: %v", err)
				return
			}
			rd = zr
		}
		body, _ := io.ReadAll(rd)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, received{r.URL.Path, r.Header.Get("Content-Type"), body})
		if lose != nil && len(got) == 1 {
			// The request arrived; its answer is lost on the way back: the connection drops.
			for c := range conns {
				lose(c)
			}
			return
		}
		for i, ex := range exchanges {
			if ex.Request.Path == r.URL.Path {
				exchanges = append(exchanges[:i], exchanges[i+1:]...)
				data, _ := base64.StdEncoding.DecodeString(ex.Response.BodyBase64)
				w.Header().Set("Content-Type", ex.Response.ContentType)
				w.WriteHeader(ex.Response.Status)
				_, _ = w.Write(data)
				return
			}
		}
		http.NotFound(w, r)
	}))
	// An http:// server is called with HTTP/2 without TLS (h2c), as clientconfig does.
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		if st == http.StateNew {
			conns[c] = true
		}
	}
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New(Options{Server: srv.URL, Token: "t0ken", Namespace: "default", ConfigFile: filepath.Join(t.TempDir(), "none.yaml"),
		ClientOptions: []connect.ClientOption{connect.WithProtoJSON()}})
	if err != nil {
		t.Fatal(err)
	}
	return c, &got
}

func recordedRequest(t *testing.T, name string) map[string]any {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "wire", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var ex exchange
	if err := json.Unmarshal(data, &ex); err != nil {
		t.Fatal(err)
	}
	return ex.Request.Body
}

func TestTrainSendsTheRecordedRequest(t *testing.T) {
	c, got := replay(t, nil, "create-ok")
	name, err := c.Train(context.Background(), TrainOptions{
		Runtime: "torch-distributed", Trainer: &CustomTrainerContainer{Command: []string{"torchrun", "train.py"}, NumNodes: 2},
		Queue: "default", ActiveDeadlineSeconds: new(int64(28800)), TTLSecondsAfterFinished: new(int32(86400)),
		Name: "wire-rec", RequestID: "wire-rec-1",
	})
	if err != nil || name != "wire-rec" {
		t.Fatalf("Train: %q, %v", name, err)
	}
	var sent map[string]any
	if err := json.Unmarshal((*got)[0].body, &sent); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recordedRequest(t, "create-ok"), sent); diff != "" {
		t.Errorf("request (-recorded +sent):\n%s", diff)
	}
}

func TestTrainAsksForATopologyLevel(t *testing.T) {
	c, got := replay(t, nil, "create-ok")
	if _, err := c.Train(context.Background(), TrainOptions{Runtime: "torch-distributed", Name: "wire-rec", Queue: "tas", Topology: "rack", TopologyPreferred: true}); err != nil {
		t.Fatal(err)
	}
	var sent struct {
		TrainJob struct {
			Spec struct {
				Topology map[string]any `json:"topology"`
			} `json:"spec"`
		} `json:"trainJob"`
	}
	if err := json.Unmarshal((*got)[0].body, &sent); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"level": "rack", "preferred": true}, sent.TrainJob.Spec.Topology); diff != "" {
		t.Errorf("topology (-want +sent):\n%s", diff)
	}
	if _, err := c.Train(context.Background(), TrainOptions{Runtime: "torch-distributed", TopologyPreferred: true}); err == nil || !strings.Contains(err.Error(), "TopologyPreferred: name the level with Topology") {
		t.Errorf("TopologyPreferred without Topology: %v", err)
	}
}

func TestTrainRetriesALostAnswerWithTheSameRequestID(t *testing.T) {
	for _, lost := range []struct {
		name string
		drop func(net.Conn)
	}{
		{"connection closed", func(c net.Conn) { _ = c.Close() }},
		// A reset (RST, as when the server dies with unread data) reaches connect as
		// ECONNRESET, which it codes Canceled, not Unavailable (CI once failed on it).
		{"connection reset", func(c net.Conn) {
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
		}},
	} {
		t.Run(lost.name, func(t *testing.T) {
			c, got := replay(t, lost.drop, "create-ok")
			name, err := c.Train(context.Background(), TrainOptions{Runtime: "torch-distributed", Name: "wire-rec"})
			if err != nil || name != "wire-rec" {
				t.Fatalf("Train: %q, %v", name, err)
			}
			if len(*got) != 2 {
				t.Fatalf("%d requests, want 2", len(*got))
			}
			ids := map[string]bool{}
			for _, r := range *got {
				var m map[string]any
				_ = json.Unmarshal(r.body, &m)
				ids[m["requestId"].(string)] = true
			}
			if len(ids) != 1 {
				t.Errorf("request ids %v: want one, repeated", ids)
			}
		})
	}
}

func TestGetJob(t *testing.T) {
	c, _ := replay(t, nil, "get-complete")
	j, err := c.GetJob(context.Background(), "", "wire-rec")
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != StatusComplete || j.Reason != "AllJobsCompleted" || len(j.Steps) != 2 || j.Steps[1].Status != "Succeeded" ||
		*j.ActiveDeadlineSeconds != 28800 || *j.TTLSecondsAfterFinished != 86400 || j.TTLDeleteTime == nil || j.Queue != "default" {
		t.Errorf("job: %+v", j)
	}
}

func TestWaitReadsTheStream(t *testing.T) {
	c, got := replay(t, nil, "watch-complete")
	var seen []Status
	j, err := c.WaitForJobStatus(context.Background(), "wire-rec", []Status{StatusComplete}, WaitOptions{Callbacks: []func(*TrainJob){func(j *TrainJob) { seen = append(seen, j.Status) }}})
	if err != nil || j.Status != StatusComplete {
		t.Fatalf("WaitForJobStatus: %v, %v", j, err)
	}
	if diff := cmp.Diff([]Status{StatusComplete}, seen); diff != "" {
		t.Error(diff)
	}
	if ct := (*got)[0].contentType; ct != "application/connect+json" {
		t.Errorf("content type %q", ct)
	}
}

func TestLogsAndTheErrorAtTheEndOfAStream(t *testing.T) {
	c, _ := replay(t, nil, "logs", "logs-not-found")
	var lines []string
	for l, err := range c.GetJobLogs(context.Background(), "wire-rec", LogOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 5 || lines[4] != "[kiln-sim] training complete" {
		t.Errorf("lines %q", lines)
	}
	for _, err := range c.GetJobLogs(context.Background(), "wire-missing", LogOptions{AllSteps: true}) {
		var e *Error
		if !errors.Is(err, ErrNotFound) || !errors.As(err, &e) || e.Message == "" {
			t.Errorf("error %v: want not_found", err)
		}
	}
}

func TestErrors(t *testing.T) {
	c, _ := replay(t, nil, "create-invalid", "list-denied")
	_, err := c.Train(context.Background(), TrainOptions{Runtime: "torch-distributed", Name: "x", RequestID: "wire-rec-2"})
	var e *Error
	if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &e) || len(e.FieldViolations) != 1 || e.FieldViolations[0].Field != "train_job.name" {
		t.Errorf("Train: %v (%+v)", err, e)
	}
	if _, err := c.ListJobs(context.Background(), ListOptions{Namespace: "kube-system"}); !errors.Is(err, ErrPermissionDenied) || errors.Is(err, ErrNotFound) {
		t.Errorf("ListJobs: %v", err)
	}
	if _, err := c.ListJobs(context.Background(), ListOptions{Statuses: []Status{"Done"}}); err == nil || err.Error() != `ListOptions.Statuses: status "Done": want one of Created, Queued, Running, Suspended, Complete, Failed` {
		t.Errorf("ListJobs: %v", err)
	}
}

func TestListJobsSendsStatusesInKubeflowsWords(t *testing.T) {
	c, got := replay(t, nil, "list-denied")
	if _, err := c.ListJobs(context.Background(), ListOptions{Statuses: []Status{StatusCreated, StatusRunning}}); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("ListJobs: %v", err)
	}
	var body map[string]any
	if err := json.Unmarshal((*got)[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{"Created", "Running"}, body["statuses"]); diff != "" || body["states"] != nil {
		t.Errorf("request %s: statuses (-want +got):\n%s", (*got)[0].body, diff)
	}
}

func TestStatusIsTheServers(t *testing.T) {
	for _, tc := range []struct {
		st   *kilnv1.TrainJobStatus
		want Status
	}{
		{&kilnv1.TrainJobStatus{State: kilnv1.State_STATE_RUNNING, Status: "Created"}, StatusCreated},
		{&kilnv1.TrainJobStatus{State: kilnv1.State_STATE_RUNNING, Status: "Running"}, StatusRunning},
		// A server older than the field: its state says it.
		{&kilnv1.TrainJobStatus{State: kilnv1.State_STATE_QUEUED}, StatusQueued},
		{&kilnv1.TrainJobStatus{}, ""},
	} {
		if got := statusOf(tc.st); got != tc.want {
			t.Errorf("statusOf(%v) = %q, want %q", tc.st, got, tc.want)
		}
	}
}
