package bench

import (
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
