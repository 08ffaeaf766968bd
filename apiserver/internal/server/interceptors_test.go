package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kiln-ml/kiln/apiserver/internal/auth"
)

// A watch the client ends is the normal end of a watch: counted and logged as canceled at
// the info level, not as an unknown or internal error that drowns dashboards and alerts.
// A server's own failure stays an error.
func TestACallTheClientEndedIsCanceled(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for name, tc := range map[string]struct {
		ctx       context.Context
		err       error
		wantCode  string
		wantLevel string
	}{
		"the client closed the watch":    {ctx: ended, err: context.Canceled, wantCode: "canceled", wantLevel: "INFO"},
		"it ended while a write failed":  {ctx: ended, err: connect.NewError(connect.CodeInternal, errors.New("write: broken pipe")), wantCode: "canceled", wantLevel: "INFO"},
		"the server failed, client here": {ctx: context.Background(), err: connect.NewError(connect.CodeInternal, errors.New("boom")), wantCode: "internal", wantLevel: "WARN"},
		"it ended well":                  {ctx: context.Background(), wantCode: "ok", wantLevel: "INFO"},
	} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			m := newMetrics()
			l := logInterceptor{log: slog.New(slog.NewTextHandler(&logs, nil)), metrics: m}
			l.record(tc.ctx, &auth.Recorder{}, "/kiln.v1.TrainJobService/WatchTrainJobs", "connect", true, time.Now(), tc.err)
			if got := testutil.ToFloat64(m.requests.WithLabelValues("/kiln.v1.TrainJobService/WatchTrainJobs", tc.wantCode)); got != 1 {
				t.Errorf("kiln_apiserver_requests_total{code=%q} = %v, want 1", tc.wantCode, got)
			}
			if !strings.Contains(logs.String(), "level="+tc.wantLevel) || !strings.Contains(logs.String(), "code="+tc.wantCode) {
				t.Errorf("logged %q, want level %s, code %s", logs.String(), tc.wantLevel, tc.wantCode)
			}
		})
	}
}
