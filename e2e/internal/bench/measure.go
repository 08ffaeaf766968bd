package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

type procUsage struct {
	rss, peakRSS int64
	// rssFile is the part of rss that is mapped files (the binary's pages), the rest
	// anonymous memory (the Go heap, stacks and runtime).
	rssFile int64
	cpu     time.Duration
}

// readProcUsage reads a process's resident memory now and at its peak (VmRSS, VmHWM) and
// the CPU time it used (utime+stime) from /proc.
func readProcUsage(pid int) (procUsage, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return procUsage{}, fmt.Errorf("opening /proc: %w", err)
	}
	return procUsageOf(fs, pid)
}

func procUsageOf(fs procfs.FS, pid int) (procUsage, error) {
	proc, err := fs.Proc(pid)
	if err != nil {
		return procUsage{}, fmt.Errorf("reading usage of pid %d: %w", pid, err)
	}
	status, err := proc.NewStatus()
	if err != nil {
		return procUsage{}, fmt.Errorf("reading memory of pid %d: %w", pid, err)
	}
	stat, err := proc.Stat()
	if err != nil {
		return procUsage{}, fmt.Errorf("reading CPU time of pid %d: %w", pid, err)
	}
	return procUsage{
		rss:     int64(status.VmRSS), // bytes
		peakRSS: int64(status.VmHWM),
		rssFile: int64(status.RssFile),
		// Whole clock ticks in float seconds: rounding gives back the exact duration.
		cpu: time.Duration(math.Round(stat.CPUTime() * float64(time.Second))),
	}, nil
}

var (
	webhookDuration = regexp.MustCompile(`^apiserver_admission_webhook_admission_duration_seconds_(sum|count)\{([^}]*)\} ([0-9.e+]+)$`)
	requestTotal    = regexp.MustCompile(`^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$`)
	label           = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// webhookSeconds reads the total time the apiserver spent in the TrainJob controller's own
// admission webhooks on TrainJob creates (Kueue's are left out), and how many calls that was.
func webhookSeconds(ctx context.Context, cfg *rest.Config) (seconds, calls float64, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, 0, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	seconds, calls = parseWebhookSeconds(raw)
	return seconds, calls, nil
}

func parseWebhookSeconds(raw []byte) (seconds, calls float64) {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := webhookDuration.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range label.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = l[2]
		}
		if !strings.Contains(labels["name"], "trainjob.") || strings.HasSuffix(labels["name"], ".kb.io") || labels["operation"] != "CREATE" {
			continue
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		if m[1] == "sum" {
			seconds += v
		} else {
			calls += v
		}
	}
	return seconds, calls
}

// writeCounts reads the apiserver's write requests so far (apiserver_request_total with
// a mutating verb), by resource[/subresource].
func writeCounts(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	raw, err := apiserverMetrics(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return parseRequestCounts(raw, writeVerbs, false), nil
}

// writeVerbs are the apiserver's verbs that write (a collection's deletion counts as a DELETE
// of scope "namespace"); readVerbs those that read once (a watch is long-running).
var (
	writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE", "APPLY"}
	readVerbs  = []string{"GET", "LIST"}
)

func apiserverMetrics(ctx context.Context, cfg *rest.Config) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	return raw, nil
}

// parseRequestCounts counts the requests of verbs by resource[/subresource]; if byVerb, each
// preceded by its verb, and the ones the apiserver refused followed by their code.
func parseRequestCounts(raw []byte, verbs []string, byVerb bool) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := requestTotal.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range label.FindAllStringSubmatch(m[1], -1) {
			labels[l[1]] = l[2]
		}
		if !slices.Contains(verbs, labels["verb"]) {
			continue
		}
		res := labels["resource"]
		if labels["subresource"] != "" {
			res += "/" + labels["subresource"]
		}
		if labels["dry_run"] != "" {
			res += dryRun
		}
		if byVerb {
			res = labels["verb"] + " " + res
			if code := labels["code"]; code != "" && code[0] != '2' {
				res += " (" + code + ")"
			}
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		out[res] += v
	}
	return out
}

// dryRun marks the requests the apiserver answered without storing anything (dryRun=All:
// Kueue creates a throwaway Workload that way to default a job's pod sets, at every
// reconcile of the job that compares them).
const dryRun = " (dry run)"

func sumValues(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// storedWrites is the sum of the writes that were not dry runs.
func storedWrites(m map[string]float64) float64 {
	var t float64
	for k, v := range m {
		if !strings.HasSuffix(k, dryRun) {
			t += v
		}
	}
	return t
}

// auditedWrites reads the apiserver's audit log and counts the write requests on objects in
// namespace ns, by writer (the client's user agent, which names the program), resource and
// whether the apiserver accepted them.
func auditedWrites(path, ns string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Verb       string `json:"verb"`
			RequestURI string `json:"requestURI"`
			UserAgent  string `json:"userAgent"`
			ObjectRef  *struct {
				Resource, Namespace, Subresource string
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.ObjectRef == nil || ev.ObjectRef.Namespace != ns {
			continue
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		if u, err := url.Parse(ev.RequestURI); err == nil && u.Query().Get("dryRun") != "" {
			res += dryRun
		}
		outcome := "ok"
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 300 {
			outcome = strconv.Itoa(ev.ResponseStatus.Code)
		}
		out[fmt.Sprintf("%s\t%s %s\t%s", writerOf(ev.UserAgent), ev.Verb, res, outcome)]++
	}
	return out, sc.Err()
}

// auditedTimers are the instants the apiserver answered the writes that carry out the
// TrainJobs' timers, from its audit log: a TrainJob's status write that set
// DeadlineExceeded (the first accepted write whose body names it), its JobSet's deletion and
// its own deletion (the first accepted DELETE of each); and the instants the apiserver began
// handling each of those writes. A write is stored when it is answered; a watch delivers it
// later, on a busy machine by up to a few tenths of a second.
type auditedTimers struct {
	failed, jobSetDeleted, deleted                         map[types.NamespacedName]time.Time
	failedReceived, jobSetDeletedReceived, deletedReceived map[types.NamespacedName]time.Time
}

// auditedTimersIn reads them for namespace ns.
func auditedTimersIn(path, ns string) (auditedTimers, error) {
	mk := func() map[types.NamespacedName]time.Time { return map[types.NamespacedName]time.Time{} }
	out := auditedTimers{failed: mk(), jobSetDeleted: mk(), deleted: mk(), failedReceived: mk(), jobSetDeletedReceived: mk(), deletedReceived: mk()}
	f, err := os.Open(path)
	if err != nil {
		return out, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		var ev struct {
			Verb      string `json:"verb"`
			ObjectRef *struct {
				Resource, Namespace, Name, Subresource string
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			RequestObject            json.RawMessage `json:"requestObject"`
			RequestReceivedTimestamp time.Time       `json:"requestReceivedTimestamp"`
			StageTimestamp           time.Time       `json:"stageTimestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.ObjectRef == nil || ev.ObjectRef.Namespace != ns ||
			ev.ResponseStatus == nil || ev.ResponseStatus.Code >= 300 {
			continue
		}
		var answered, received map[types.NamespacedName]time.Time
		switch r := ev.ObjectRef; {
		case r.Resource == "trainjobs" && r.Subresource == "status" && (ev.Verb == "patch" || ev.Verb == "update") &&
			bytes.Contains(ev.RequestObject, []byte(`"DeadlineExceeded"`)):
			answered, received = out.failed, out.failedReceived
		case r.Resource == "trainjobs" && r.Subresource == "" && ev.Verb == "delete":
			answered, received = out.deleted, out.deletedReceived
		case r.Resource == "jobsets" && r.Subresource == "" && ev.Verb == "delete":
			answered, received = out.jobSetDeleted, out.jobSetDeletedReceived
		default:
			continue
		}
		k := types.NamespacedName{Namespace: ns, Name: ev.ObjectRef.Name}
		if at, ok := answered[k]; !ok || ev.StageTimestamp.Before(at) {
			answered[k], received[k] = ev.StageTimestamp, ev.RequestReceivedTimestamp
		}
	}
	return out, sc.Err()
}

// writerOf is the program a user agent names: "kube-controller-manager/v1.36.3 (linux/amd64)
// kubernetes/abcdef/system:serviceaccount:kube-system:job-controller" is job-controller.
func writerOf(ua string) string {
	if i := strings.LastIndex(ua, "/system:serviceaccount:"); i >= 0 {
		return ua[strings.LastIndex(ua, ":")+1:]
	}
	if i := strings.IndexByte(ua, '/'); i > 0 {
		return ua[:i]
	}
	return ua
}
