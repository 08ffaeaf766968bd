package bench

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond} {
		if got := percentile(ds, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestParseWriteCounts(t *testing.T) {
	raw := []byte(`# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",dry_run="",group="jobset.x-k8s.io",resource="jobsets",scope="resource",subresource="",verb="POST",version="v1alpha2"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="trainer.kubeflow.org",resource="trainjobs",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="trainer.kubeflow.org",resource="trainjobs",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 100
`)
	got := parseWriteCounts(raw)
	if got["jobsets"] != 7 || got["trainjobs/status"] != 4 || len(got) != 2 {
		t.Fatalf("got %v", got)
	}
}

func TestParseWebhookSeconds(t *testing.T) {
	raw := []byte(`apiserver_admission_webhook_admission_duration_seconds_sum{name="defaulter.trainjob.kiln.dev",operation="CREATE",rejected="false",type="admit"} 1.5
apiserver_admission_webhook_admission_duration_seconds_count{name="defaulter.trainjob.kiln.dev",operation="CREATE",rejected="false",type="admit"} 100
apiserver_admission_webhook_admission_duration_seconds_sum{name="validator.trainjob.kiln.dev",operation="CREATE",rejected="false",type="validating"} 0.5
apiserver_admission_webhook_admission_duration_seconds_count{name="validator.trainjob.kiln.dev",operation="CREATE",rejected="false",type="validating"} 100
apiserver_admission_webhook_admission_duration_seconds_sum{name="mtrainjob.kb.io",operation="CREATE",rejected="false",type="admit"} 9
apiserver_admission_webhook_admission_duration_seconds_sum{name="validator.trainjob.kiln.dev",operation="UPDATE",rejected="false",type="validating"} 7
`)
	s, n := parseWebhookSeconds(raw)
	if s != 2 || n != 200 {
		t.Fatalf("got %v s over %v calls", s, n)
	}
}

func TestAuditedWrites(t *testing.T) {
	log := `{"kind":"Event","verb":"update","userAgent":"kiln-operator/v0.0.0 (linux/amd64) kubernetes/$Format","objectRef":{"resource":"trainjobs","namespace":"q","subresource":"status"},"responseStatus":{"code":200}}
{"kind":"Event","verb":"update","userAgent":"kiln-operator/v0.0.0 (linux/amd64) kubernetes/$Format","objectRef":{"resource":"trainjobs","namespace":"q","subresource":"status"},"responseStatus":{"code":409}}
{"kind":"Event","verb":"create","userAgent":"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:job-controller","objectRef":{"resource":"pods","namespace":"q"},"responseStatus":{"code":201}}
{"kind":"Event","verb":"create","userAgent":"kueue/v0.19.0","objectRef":{"resource":"workloads","namespace":"elsewhere"},"responseStatus":{"code":201}}
not json
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := auditedWrites(path, "q")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"kiln-operator\tupdate trainjobs/status\tok":  1,
		"kiln-operator\tupdate trainjobs/status\t409": 1,
		"job-controller\tcreate pods\tok":             1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("auditedWrites = %v, want %v", got, want)
	}
}
