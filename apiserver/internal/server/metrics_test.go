package server

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The chart's dashboard uses only metrics the API server serves, and the docs list every
// one of its own.
func TestDashboardUsesServedMetrics(t *testing.T) {
	m := newMetrics()
	served := map[string]bool{}
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		served[f.GetName()] = true
	}
	// Vectors are gathered once they have a series.
	for _, name := range []string{"kiln_apiserver_requests_total", "kiln_apiserver_request_duration_seconds"} {
		served[name] = true
	}
	m.observe("/kiln.v1.TrainJobService/ListTrainJobs", false, time.Now(), nil)
	families, err = m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "kiln_") {
			own[f.GetName()] = true
		}
	}
	if len(own) != 3 || !own["kiln_build_info"] {
		t.Errorf("the API server serves %v, want its 2 kiln_apiserver_* metrics and kiln_build_info", own)
	}
	for f, want := range map[string]map[string]bool{"../../../charts/kiln/dashboards/kiln.json": served, "../../../docs/observability.md": own} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		used := map[string]bool{}
		for _, name := range regexp.MustCompile(`kiln_(?:apiserver_[a-z_]*|build_info)`).FindAllString(string(data), -1) {
			name = strings.TrimSuffix(name, "_bucket")
			used[name] = true
			if !served[name] {
				t.Errorf("%s uses %s, which the API server does not serve", f, name)
			}
		}
		for name := range want {
			if strings.HasPrefix(name, "kiln_") && !used[name] {
				t.Errorf("%s does not mention %s", f, name)
			}
		}
	}
}
