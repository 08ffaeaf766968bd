package kiln

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/api/gen/kiln/v1/kilnv1connect"
)

// fakeWatch answers the n-th watch with streams[n]: its events, then its error.
type fakeWatch struct {
	kilnv1connect.UnimplementedTrainJobServiceHandler
	mu      sync.Mutex
	streams []watchStream
	// versions are the resource versions the watches asked for.
	versions []string
}

type watchStream struct {
	events []*kilnv1.WatchTrainJobsResponse
	err    error
}

func (f *fakeWatch) WatchTrainJobs(_ context.Context, req *connect.Request[kilnv1.WatchTrainJobsRequest], stream *connect.ServerStream[kilnv1.WatchTrainJobsResponse]) error {
	f.mu.Lock()
	n := len(f.versions)
	f.versions = append(f.versions, req.Msg.GetResourceVersion())
	f.mu.Unlock()
	if n >= len(f.streams) {
		return connect.NewError(connect.CodeInternal, errors.New("no more streams"))
	}
	for _, ev := range f.streams[n].events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return f.streams[n].err
}

func watchClient(t *testing.T, f *fakeWatch) *Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(kilnv1connect.NewTrainJobServiceHandler(f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := New(Options{Server: srv.URL, Namespace: "team-a", ConfigFile: filepath.Join(t.TempDir(), "none.yaml"), HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func event(typ kilnv1.WatchEventType, rv string, state kilnv1.State) *kilnv1.WatchTrainJobsResponse {
	ev := &kilnv1.WatchTrainJobsResponse{Type: typ, ResourceVersion: rv}
	if state != kilnv1.State_STATE_UNSPECIFIED {
		ev.TrainJob = &kilnv1.TrainJob{Name: "llm", Namespace: "team-a", ResourceVersion: rv, Status: &kilnv1.TrainJobStatus{State: state}}
	}
	return ev
}

const (
	added    = kilnv1.WatchEventType_WATCH_EVENT_TYPE_ADDED
	modified = kilnv1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED
	deleted  = kilnv1.WatchEventType_WATCH_EVENT_TYPE_DELETED
	synced   = kilnv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED
)

func TestWatchJob(t *testing.T) {
	unavailable := connect.NewError(connect.CodeUnavailable, errors.New("server restarting"))
	running, complete := kilnv1.State_STATE_RUNNING, kilnv1.State_STATE_COMPLETE
	for name, tc := range map[string]struct {
		streams      []watchStream
		wantStates   []kilnv1.State
		wantVersions []string
		wantErr      func(error) bool
	}{
		"until it says so": {
			streams:      []watchStream{{events: []*kilnv1.WatchTrainJobsResponse{event(added, "5", running), event(synced, "5", 0), event(modified, "6", complete)}}},
			wantStates:   []kilnv1.State{running, complete},
			wantVersions: []string{""},
		},
		"resumes a dropped stream from the last version": {
			streams: []watchStream{
				{events: []*kilnv1.WatchTrainJobsResponse{event(added, "5", running), event(synced, "5", 0)}, err: unavailable},
				{},
				{events: []*kilnv1.WatchTrainJobsResponse{event(modified, "7", complete)}},
			},
			wantStates:   []kilnv1.State{running, complete},
			wantVersions: []string{"", "5", "5"},
		},
		"synced before the job: not found": {
			streams:      []watchStream{{events: []*kilnv1.WatchTrainJobsResponse{event(synced, "5", 0)}}},
			wantVersions: []string{""},
			wantErr: func(err error) bool {
				var gone *JobGoneError
				return errors.As(err, &gone) && !gone.Deleted && errors.Is(err, ErrNotFound) && err.Error() == "TrainJob team-a/llm not found"
			},
		},
		"deleted": {
			streams:      []watchStream{{events: []*kilnv1.WatchTrainJobsResponse{event(added, "5", running), event(synced, "5", 0), event(deleted, "6", running)}}},
			wantStates:   []kilnv1.State{running},
			wantVersions: []string{""},
			wantErr: func(err error) bool {
				var gone *JobGoneError
				return errors.As(err, &gone) && gone.Deleted && gone.Job.GetName() == "llm" && errors.Is(err, ErrNotFound)
			},
		},
		"an error that retrying does not mend": {
			streams:      []watchStream{{err: connect.NewError(connect.CodePermissionDenied, errors.New("no"))}},
			wantVersions: []string{""},
			wantErr:      func(err error) bool { return connect.CodeOf(err) == connect.CodePermissionDenied },
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeWatch{streams: tc.streams}
			var states []kilnv1.State
			j, err := watchClient(t, f).WatchJob(t.Context(), "", "llm", func(j *kilnv1.TrainJob) bool {
				states = append(states, j.GetStatus().GetState())
				return j.GetStatus().GetState() == complete
			})
			switch {
			case tc.wantErr == nil && (err != nil || j.GetStatus().GetState() != complete):
				t.Errorf("WatchJob() = %v, %v; want the complete job", j, err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Errorf("WatchJob() error %v", err)
			}
			if diff := cmp.Diff(tc.wantStates, states); diff != "" {
				t.Errorf("states seen (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantVersions, f.versions); diff != "" {
				t.Errorf("resource versions watched from (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWatchJobEndsWithTheContext(t *testing.T) {
	f := &fakeWatch{streams: []watchStream{{events: []*kilnv1.WatchTrainJobsResponse{event(added, "5", kilnv1.State_STATE_RUNNING)}}}}
	ctx, cancel := context.WithCancel(t.Context())
	_, err := watchClient(t, f).WatchJob(ctx, "", "llm", func(*kilnv1.TrainJob) bool { cancel(); return false })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("WatchJob() error %v, want the context's", err)
	}
}

func TestWaitForJobStatusWordsTheEnd(t *testing.T) {
	for name, tc := range map[string]struct {
		events   []*kilnv1.WatchTrainJobsResponse
		wantCode connect.Code
		wantMsg  string
	}{
		"deleted": {events: []*kilnv1.WatchTrainJobsResponse{event(added, "5", kilnv1.State_STATE_RUNNING), event(deleted, "6", kilnv1.State_STATE_RUNNING)},
			wantCode: connect.CodeNotFound, wantMsg: "TrainJob team-a/llm was deleted while waiting for it"},
		"not found": {events: []*kilnv1.WatchTrainJobsResponse{event(synced, "5", 0)},
			wantCode: connect.CodeNotFound, wantMsg: `TrainJob "llm" not found in namespace team-a`},
	} {
		t.Run(name, func(t *testing.T) {
			c := watchClient(t, &fakeWatch{streams: []watchStream{{events: tc.events}}})
			_, err := c.WaitForJobStatus(t.Context(), "llm", []Status{StatusComplete}, WaitOptions{})
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.wantCode || e.Message != tc.wantMsg {
				t.Errorf("error %v, want %v: %s", err, tc.wantCode, tc.wantMsg)
			}
			// An error the SDK made has no Connect error inside to find.
			if connect.CodeOf(err) != connect.CodeUnknown {
				t.Errorf("connect.CodeOf(%v) = %v", err, connect.CodeOf(err))
			}
		})
	}
}
