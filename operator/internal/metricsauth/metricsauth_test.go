package metricsauth

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHintingNamesTheRoleOnA403Only(t *testing.T) {
	cases := map[string]struct {
		code int
		body string
		want string
	}{
		"forbidden":    {http.StatusForbidden, "Authorization denied for user system:serviceaccount:ns:nobody", "Authorization denied for user system:serviceaccount:ns:nobody: it may not get /metrics: bind a ClusterRole that allows it (the chart's kiln-metrics-reader) to it\n"},
		"unauthorized": {http.StatusUnauthorized, "Unauthorized", "Unauthorized\n"},
		"ok":           {http.StatusOK, "kiln_build_info 1", "kiln_build_info 1\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			w := &hinting{ResponseWriter: rec, path: "/metrics"}
			if tc.code == http.StatusOK {
				_, _ = w.Write([]byte(tc.body + "\n"))
			} else {
				http.Error(w, tc.body, tc.code)
			}
			if rec.Code != tc.code || rec.Body.String() != tc.want {
				t.Errorf("answered %d %q, want %d %q", rec.Code, rec.Body.String(), tc.code, tc.want)
			}
		})
	}
}
