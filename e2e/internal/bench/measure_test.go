package bench

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/procfs"
	"k8s.io/apimachinery/pkg/types"
)

// TestProcUsageOfFixture pins the units on a made-up /proc: bytes from kB, seconds from
// clock ticks (USER_HZ is 100).
func TestProcUsageOfFixture(t *testing.T) {
	// The 42 fields after the command name, utime and stime at 11 and 12.
	statFields := func(utime, stime string) string {
		f := strings.Fields(strings.Repeat("0 ", 42))
		f[0], f[11], f[12] = "S", utime, stime
		return strings.Join(f, " ")
	}
	cases := map[string]struct {
		status, stat string
		want         procUsage
		wantErr      bool
	}{
		"controller": {
			status: "Name:\tkiln-operator\nVmHWM:\t  81920 kB\nVmRSS:\t  65536 kB\nRssAnon:\t  45056 kB\nRssFile:\t  20480 kB\nThreads:\t12\n",
			stat:   "1234 (kiln-operator) " + statFields("1234", "566"),
			want:   procUsage{rss: 64 << 20, peakRSS: 80 << 20, rssFile: 20 << 20, cpu: 18 * time.Second},
		},
		"command name with spaces and parentheses, one tick": {
			status: "VmHWM:\t4 kB\nVmRSS:\t4 kB\n",
			stat:   "1234 (a (b) c) " + statFields("0", "1"),
			want:   procUsage{rss: 4 << 10, peakRSS: 4 << 10, cpu: 10 * time.Millisecond},
		},
		"201 ticks, which float seconds do not hold exactly": {
			status: "VmHWM:\t4 kB\nVmRSS:\t4 kB\n",
			stat:   "1234 (x) " + statFields("200", "1"),
			want:   procUsage{rss: 4 << 10, peakRSS: 4 << 10, cpu: 2010 * time.Millisecond},
		},
		"truncated stat": {
			status:  "VmRSS:\t4 kB\n",
			stat:    "1234 (x) S 1 1",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "1234")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for file, data := range map[string]string{"status": tc.status, "stat": tc.stat} {
				if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			fs, err := procfs.NewFS(root)
			if err != nil {
				t.Fatal(err)
			}

			got, err := procUsageOf(fs, 1234)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("procUsageOf() error = %v, want error: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(procUsage{})); diff != "" {
				t.Errorf("procUsageOf() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadProcUsageOfThisProcess reads the test process's own usage and checks it
// against what getrusage says.
func TestReadProcUsageOfThisProcess(t *testing.T) {
	// Burn some CPU, so that it shows in whole clock ticks.
	for start := cpuTime(t); cpuTime(t)-start < 100*time.Millisecond; {
		for i := 0; i < 1e6; i++ {
			_ = strconv.Itoa(i)
		}
	}
	before := cpuTime(t)
	got, err := readProcUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	after := cpuTime(t)

	// A Go test binary is several MiB resident: a figure in KiB would be under 1 MiB.
	if got.rss < 1<<20 || got.rss > 1<<40 {
		t.Errorf("rss = %d, want bytes of a test process", got.rss)
	}
	if got.peakRSS < got.rss {
		t.Errorf("peakRSS = %d, want at least rss = %d", got.peakRSS, got.rss)
	}
	// The kernel rounds both to clock ticks (10ms) from the same accounting.
	const tick = 10 * time.Millisecond
	if got.cpu < before-2*tick || got.cpu > after+2*tick {
		t.Errorf("cpu = %v, want within a tick or two of getrusage's %v–%v", got.cpu, before, after)
	}
}

func TestReadProcUsageUnknownPID(t *testing.T) {
	if _, err := readProcUsage(1 << 30); err == nil { // above Linux's PID_MAX_LIMIT
		t.Fatal("want an error for a process that does not exist")
	}
}

// cpuTime is the user and system CPU time of the test process, from getrusage.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestParseWriteCounts(t *testing.T) {
	raw := []byte(`# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",dry_run="",group="jobset.x-k8s.io",resource="jobsets",scope="resource",subresource="",verb="POST",version="v1alpha2"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="trainer.kubeflow.org",resource="trainjobs",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="trainer.kubeflow.org",resource="trainjobs",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 100
apiserver_request_total{code="201",component="apiserver",dry_run="All",group="kueue.x-k8s.io",resource="workloads",scope="resource",subresource="",verb="POST",version="v1beta2"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="namespace",subresource="",verb="DELETE",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="namespace",subresource="",verb="WATCH",version="v1"} 9
`)
	got := parseRequestCounts(raw, writeVerbs, false)
	if got["jobsets"] != 7 || got["trainjobs/status"] != 4 || got["workloads (dry run)"] != 5 || got["jobs"] != 2 || len(got) != 4 {
		t.Fatalf("got %v", got)
	}
	if sumValues(got) != 18 || storedWrites(got) != 13 {
		t.Errorf("writes %v, stored %v; want 18, 13", sumValues(got), storedWrites(got))
	}
	byVerb := parseRequestCounts(raw, writeVerbs, true)
	if byVerb["POST jobsets"] != 7 || byVerb["PUT trainjobs/status"] != 3 || byVerb["PUT trainjobs/status (409)"] != 1 || byVerb["POST workloads (dry run)"] != 5 ||
		byVerb["DELETE jobs"] != 2 || len(byVerb) != 5 {
		t.Fatalf("by verb: got %v", byVerb)
	}
	if reads := parseRequestCounts(raw, readVerbs, true); reads["LIST pods"] != 100 || len(reads) != 1 {
		t.Fatalf("reads: got %v", reads)
	}
}

// The requests while the deadlines fire: what moved between the readings, per deadline;
// written the most first (ties by name) after their total.
func TestPerDeadline(t *testing.T) {
	before := map[string]float64{"PUT trainjobs/status": 10, "DELETE jobsets": 5, "POST events": 3, "PATCH nodes/status": 7}
	after := map[string]float64{"PUT trainjobs/status": 210, "DELETE jobsets": 205, "POST events": 403, "DELETE jobs": 200, "PATCH nodes/status": 7}
	got := perDeadline(before, after, 200)
	if diff := cmp.Diff(map[string]float64{"PUT trainjobs/status": 1, "DELETE jobsets": 1, "POST events": 2, "DELETE jobs": 1}, got); diff != "" {
		t.Fatalf("perDeadline mismatch (-want +got):\n%s", diff)
	}
	want := "5.00 per deadline, POST events 2.00, DELETE jobs 1.00, DELETE jobsets 1.00, PUT trainjobs/status 1.00"
	if s := mostFirst(got, "%.2f", " per deadline"); s != want {
		t.Fatalf("got  %q\nwant %q", s, want)
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
{"kind":"Event","verb":"create","requestURI":"/apis/kueue.x-k8s.io/v1beta2/namespaces/q/workloads?dryRun=All","userAgent":"kueue/v0.19.0","objectRef":{"resource":"workloads","namespace":"q"},"responseStatus":{"code":201}}
{"kind":"Event","verb":"create","requestURI":"/apis/kueue.x-k8s.io/v1beta2/namespaces/q/workloads","userAgent":"kueue/v0.19.0","objectRef":{"resource":"workloads","namespace":"q"},"responseStatus":{"code":201}}
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
		"kueue\tcreate workloads (dry run)\tok":       1,
		"kueue\tcreate workloads\tok":                 1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("auditedWrites = %v, want %v", got, want)
	}
}

func TestAuditedTimersTakeTheFirstAcceptedWriteThatCarriesEachOut(t *testing.T) {
	ev := func(verb, resource, sub, ns, name string, code int, body, received, answered string) string {
		return fmt.Sprintf(`{"kind":"Event","verb":%q,"objectRef":{"resource":%q,"subresource":%q,"namespace":%q,"name":%q},"responseStatus":{"code":%d},"requestObject":%s,"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
			verb, resource, sub, ns, name, code, body, received, answered)
	}
	failed := `{"status":{"conditions":[{"type":"Failed","status":"True","reason":"DeadlineExceeded"}]}}`
	lines := []string{
		// a status write before the deadline, one refused, then the one that failed the job, then a later one
		ev("patch", "trainjobs", "status", "d", "a", 200, `{"status":{"jobsStatus":[]}}`, "2026-12-02T10:00:00.000000Z", "2026-12-02T10:00:00.010000Z"),
		ev("patch", "trainjobs", "status", "d", "a", 409, failed, "2026-12-02T10:00:01.000000Z", "2026-12-02T10:00:01.100000Z"),
		ev("patch", "trainjobs", "status", "d", "a", 200, failed, "2026-12-02T10:00:01.200000Z", "2026-12-02T10:00:01.300000Z"),
		ev("patch", "trainjobs", "status", "d", "a", 200, failed, "2026-12-02T10:00:02.000000Z", "2026-12-02T10:00:02.100000Z"),
		ev("update", "trainjobs", "status", "elsewhere", "a", 200, failed, "2026-12-02T10:00:00.000000Z", "2026-12-02T10:00:00.100000Z"),
		ev("delete", "jobsets", "", "d", "a", 200, "null", "2026-12-02T10:00:01.400000Z", "2026-12-02T10:00:01.500000Z"),
		ev("delete", "jobsets", "", "d", "a", 404, "null", "2026-12-02T10:00:01.600000Z", "2026-12-02T10:00:01.610000Z"),
		ev("delete", "trainjobs", "", "d", "a", 200, "null", "2026-12-02T10:00:31.050000Z", "2026-12-02T10:00:31.250000Z"),
		ev("delete", "trainjobs", "status", "d", "b", 200, "null", "2026-12-02T10:00:31.050000Z", "2026-12-02T10:00:31.250000Z"),
		"not json",
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := auditedTimersIn(path, "d")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a := types.NamespacedName{Namespace: "d", Name: "a"}
	for _, c := range []struct {
		what string
		m    map[types.NamespacedName]time.Time
		want []time.Time
	}{
		{"Failed written", got.failed, []time.Time{at("2026-12-02T10:00:01.3Z")}},
		{"Failed received", got.failedReceived, []time.Time{at("2026-12-02T10:00:01.2Z")}},
		{"JobSet deleted", got.jobSetDeleted, []time.Time{at("2026-12-02T10:00:01.5Z")}},
		{"JobSet deletion received", got.jobSetDeletedReceived, []time.Time{at("2026-12-02T10:00:01.4Z")}},
		{"TrainJob deleted", got.deleted, []time.Time{at("2026-12-02T10:00:31.25Z")}},
		{"TrainJob deletion received", got.deletedReceived, []time.Time{at("2026-12-02T10:00:31.05Z")}},
	} {
		if len(c.m) != len(c.want) || !c.m[a].Equal(c.want[0]) {
			t.Errorf("%s: %v, want %v for %s only", c.what, c.m, c.want, a)
		}
	}
}

func TestHeapFromReadsBothControllersAnswers(t *testing.T) {
	pprof := "heap profile: 1: 2 [3: 4] @ heap/1048576\n# runtime.MemStats\n# Alloc = 93892320\n# HeapInuse = 104857600\n# Stack = 1 / 2\n"
	if got, err := heapFrom(pprof, "# HeapInuse", " = "); err != nil || got != 100<<20 {
		t.Errorf("Kiln's heap profile: %d, %v; want %d", got, err, 100<<20)
	}
	metrics := "# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.\n# TYPE go_memstats_heap_inuse_bytes gauge\ngo_memstats_heap_inuse_bytes 2.09715200e+08\ngo_memstats_heap_inuse_total 1\n"
	if got, err := heapFrom(metrics, "go_memstats_heap_inuse_bytes", " "); err != nil || got != 200<<20 {
		t.Errorf("upstream's metrics: %d, %v; want %d", got, err, 200<<20)
	}
	if _, err := heapFrom("go_memstats_alloc_bytes 1\n", "go_memstats_heap_inuse_bytes", " "); err == nil {
		t.Error("a missing figure read without an error")
	}
}

func TestLoggedAtIsTheFirstMarkedLinesTimestamp(t *testing.T) {
	log := []byte("2026-11-27T21:50:01.100000000Z W1127 torchrun: a warning\n" +
		"2026-11-27T21:50:02.250000000Z " + markerWorkerUp + "\n" +
		"2026-11-27T21:50:04.500000000Z " + markerTraining + " rank 0/2\n" +
		"2026-11-27T21:50:05.000000000Z " + markerTraining + " again\n")
	got, err := loggedAt(log, markerTraining)
	want := time.Date(2026, 11, 27, 21, 50, 4, 500_000_000, time.UTC)
	if err != nil || !got.Equal(want) {
		t.Errorf("loggedAt = %s, %v; want %s", got, err, want)
	}
	if _, err := loggedAt(log, "never printed"); err == nil || !strings.Contains(err.Error(), "torchrun: a warning") {
		t.Errorf("a missing marker: %v; want an error that shows the log", err)
	}
}
