package python

import "testing"

func TestNames(t *testing.T) {
	for in, want := range map[string]string{
		"GetServerInfo":  "get_server_info",
		"StreamLogs":     "stream_logs",
		"ListTrainJobs":  "list_train_jobs",
		"GetHTTPSConfig": "get_https_config",
		"Import":         "import_",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
	if got := pyName("from"); got != "from_" {
		t.Errorf("pyName(from) = %q", got)
	}
	if got := ModuleName("kiln.v1"); got != "kiln_v1" {
		t.Errorf("ModuleName = %q", got)
	}
}
