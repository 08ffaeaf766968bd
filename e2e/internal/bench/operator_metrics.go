package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// benchScraper names the ServiceAccount the bench reads Kiln's operator's metrics as (in a
// namespace of the same name), and its ClusterRole and binding: what a Prometheus bound to
// the chart's kiln-metrics-reader is allowed.
const benchScraper = "kiln-bench-scraper"

// operatorMetrics returns Kiln's operator's metrics (Prometheus text).
func (e *env) operatorMetrics(ctx context.Context) (string, error) {
	if e.scrapeToken == "" {
		token, err := e.scraperToken(ctx)
		if err != nil {
			return "", fmt.Errorf("a token to read the operator's metrics: %w", err)
		}
		e.scrapeToken = token
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", e.p.OperatorMetrics)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+e.scrapeToken)
	// The operator's serving certificate is self-signed; what it checks is the token.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback, self-signed
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("reading the operator's metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("reading the operator's metrics: %s: %s", resp.Status, body)
	}
	return string(body), nil
}

// scraperToken makes the bench's scraper and returns a token of it.
func (e *env) scraperToken(ctx context.Context) (string, error) {
	ns := benchScraper // a namespace of its own: the bench's platform may not have kiln-system
	if err := e.namespace(ctx, ns); err != nil {
		return "", err
	}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: benchScraper}},
		// What the chart's kiln-metrics-reader allows (the bench's platform runs without the
		// API server, whose RBAC brings that role).
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: benchScraper},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: benchScraper},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: benchScraper},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: benchScraper}},
		},
	} {
		if err := e.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	kc, err := kubernetes.NewForConfig(e.cfg)
	if err != nil {
		return "", err
	}
	return platform.ServiceAccountToken(ctx, kc, ns, benchScraper, 3600)
}

// histogram is a Prometheus histogram's cumulative bucket counts by upper bound (le).
type histogram map[float64]float64

var bucketLine = regexp.MustCompile(`^(\w+)_bucket\{(.*)\} (\S+)$`)

// parseHistogram sums the buckets of histogram name over the series whose labels contain
// every one of match (each `key="value"`).
func parseHistogram(text, name string, match ...string) histogram {
	h := histogram{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := bucketLine.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != name {
			continue
		}
		labels := m[2]
		if !allIn(labels, match) {
			continue
		}
		le := leOf(labels)
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil || math.IsNaN(le) {
			continue
		}
		h[le] += v
	}
	return h
}

func allIn(labels string, match []string) bool {
	for _, m := range match {
		if !strings.Contains(labels, m) {
			return false
		}
	}
	return true
}

var leLabel = regexp.MustCompile(`le="([^"]+)"`)

func leOf(labels string) float64 {
	m := leLabel.FindStringSubmatch(labels)
	if m == nil {
		return math.NaN()
	}
	if m[1] == "+Inf" {
		return math.Inf(1)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// minus is what h counted since before.
func (h histogram) minus(before histogram) histogram {
	out := histogram{}
	for le, v := range h {
		out[le] = v - before[le]
	}
	return out
}

// count is how many observations h holds.
func (h histogram) count() float64 { return h[math.Inf(1)] }

// quantile is the upper bound of the bucket that holds quantile q (0–1) of the
// observations: "at most this long" (+Inf past the last finite bucket; NaN when empty).
func (h histogram) quantile(q float64) float64 {
	n := h.count()
	if n == 0 {
		return math.NaN()
	}
	les := make([]float64, 0, len(h))
	for le := range h {
		les = append(les, le)
	}
	slices.Sort(les)
	for _, le := range les {
		if h[le] >= q*n {
			return le
		}
	}
	return math.Inf(1)
}

// atMost formats a quantile's bucket bound: "≤ 0.5 s".
func atMost(s float64) string {
	switch {
	case math.IsNaN(s):
		return "none"
	case math.IsInf(s, 1):
		return "past the last bucket"
	}
	return "≤ " + strconv.FormatFloat(s, 'g', 2, 64) + " s"
}

// untilFirstDeadline waits until a second before the first deadline of namespace ns falls
// due, by the TrainJobs in the bench's cache as they are now (a job not started yet counts
// from its creation: sooner, never later). The tracker learns each due instant only once
// the job failed, too late for this.
func (e *env) untilFirstDeadline(ctx context.Context, ns string) error {
	list := &trainer.TrainJobList{}
	if err := e.cache.List(ctx, list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing the TrainJobs for their first deadline: %w", err)
	}
	if first := firstDeadline(list.Items); !first.IsZero() {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(first.Add(-time.Second))):
		}
	}
	return ctx.Err()
}

// firstDeadline is the soonest instant a deadline of jobs falls due (zero if none has one).
func firstDeadline(jobs []trainer.TrainJob) time.Time {
	var first time.Time
	for i := range jobs {
		tj := &jobs[i]
		if tj.Spec.ActiveDeadlineSeconds == nil {
			continue
		}
		if due := activeSince(tj).Add(time.Duration(*tj.Spec.ActiveDeadlineSeconds) * time.Second); first.IsZero() || due.Before(first) {
			first = due
		}
	}
	return first
}

// operatorViewOfDeadlines reads Kiln's operator's metrics (call it a second before the first
// deadline of namespace ns falls due); the functions it returns read them again, once the
// deadlines fired and once the TTLs did, and log the operator's own account of them
// (operatorView, operatorViewOfTTLs), so that the bench's figures, which include the watch's
// delivery to the bench, can be told from the operator's part. Upstream's controller has no
// such metric. A reading that fails is logged, not fatal: the figures are for diagnosis.
func (e *env) operatorViewOfDeadlines(ctx context.Context) (deadlines, ttls func()) {
	if e.p.Trainer != platform.TrainerKiln {
		return func() {}, func() {}
	}
	before, err := e.operatorMetrics(ctx)
	if err != nil {
		e.logf("deadline: the operator's view: %v", err)
		return func() {}, func() {}
	}
	view := func(what string, account func(before, after string) string) func() {
		return func() {
			after, err := e.operatorMetrics(ctx)
			if err != nil {
				e.logf("%s: the operator's view: %v", what, err)
				return
			}
			e.logf("%s, the operator's view: %s", what, account(before, after))
		}
	}
	return view("deadline", operatorView), view("TTL", operatorViewOfTTLs)
}

// operatorViewOfTTLs is the operator's own account of the TTLs that fell due between two
// readings of its metrics: how late it issued each deletion.
func operatorViewOfTTLs(before, after string) string {
	lag := parseHistogram(after, "kiln_trainjob_timer_lag_seconds", `timer="ttl"`).minus(parseHistogram(before, "kiln_trainjob_timer_lag_seconds", `timer="ttl"`))
	return fmt.Sprintf("deletion issued p50 %s, p99 %s after due (%.0f TTLs)", atMost(lag.quantile(0.5)), atMost(lag.quantile(0.99)), lag.count())
}

// operatorView is the operator's own account of the deadline scenario's timers, from the
// difference of two readings of its metrics: how late it stored each Failed (the timer's
// lag), how long reconciles of TrainJobs waited in its work queue and how long they took.
func operatorView(before, after string) string {
	lag := parseHistogram(after, "kiln_trainjob_timer_lag_seconds", `timer="deadline"`).minus(parseHistogram(before, "kiln_trainjob_timer_lag_seconds", `timer="deadline"`))
	wait := parseHistogram(after, "workqueue_queue_duration_seconds", `name="trainjob"`).minus(parseHistogram(before, "workqueue_queue_duration_seconds", `name="trainjob"`))
	took := parseHistogram(after, "controller_runtime_reconcile_time_seconds", `controller="trainjob"`).minus(parseHistogram(before, "controller_runtime_reconcile_time_seconds", `controller="trainjob"`))
	return fmt.Sprintf("Failed stored p50 %s, p99 %s after due (%.0f deadlines); reconciles waited in the work queue p50 %s, p99 %s and took p50 %s, p99 %s (%.0f reconciles)",
		atMost(lag.quantile(0.5)), atMost(lag.quantile(0.99)), lag.count(),
		atMost(wait.quantile(0.5)), atMost(wait.quantile(0.99)), atMost(took.quantile(0.5)), atMost(took.quantile(0.99)), took.count())
}
