package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/internal/stats"
)

// progressResult is what the progress scenario measured (Kiln only: upstream serves its
// status server only behind an alpha feature gate).
type progressResult struct {
	// Jobs reported every Interval for Duration each.
	Jobs     int
	Interval time.Duration
	Duration time.Duration
	// Posts were sent; Accepted answered 200; Refused by HTTP status; Failed never answered.
	Posts, Accepted, Failed int
	Refused                 map[int]int
	// PostLatency is each accepted post's round trip.
	PostLatency []time.Duration
	// Visible is, for each accepted post, the time from sending it to the bench's watch
	// seeing the TrainJob's trainerStatus at its step or a later one; NeverVisible are the
	// accepted posts whose step was never seen.
	Visible      []time.Duration
	NeverVisible int
	// StatusUpdates are the trainerStatus changes the watch saw during the load.
	StatusUpdates int
	// HistoryComplete are the jobs whose TrainJobMetrics holds every accepted report, and
	// HistoryLag how long after the load's end the last of them did.
	HistoryComplete int
	HistoryLag      time.Duration
	// Errors are a few of the errors of posts never answered.
	Errors []string
	// OperatorCPU is the operator's CPU time over the load; OperatorRSS its peak RSS.
	OperatorCPU time.Duration
	OperatorRSS int64
	// Timers: deadline lags of TimerJobs TrainJobs before the load (idle) and during it.
	TimerJobs                  int
	IdleDeadline, LoadDeadline []time.Duration
	IdleMissed, LoadMissed     int
	TimerDeadline              time.Duration
}

const (
	progressNamespace  = "bench-progress"
	idleTimerNamespace = "bench-timers-idle"
	loadTimerNamespace = "bench-timers-load"
)

// progress: ProgressJobs running TrainJobs whose trainers each post an
// UpdateTrainJobStatusRequest every ProgressInterval for ProgressDuration, with a
// pod-bound token of the job's audience, exactly as a trainer does. Measured: posts
// accepted per second, from each post to the bench's watch seeing its step in
// status.trainerStatus, the history kept; and the operator's other timers, as the lag
// of TimerJobs deadlines that fall due during the load against the same deadlines on
// the idle platform just before.
func progress(ctx context.Context, e *env) (*progressResult, error) {
	o := e.o
	res := &progressResult{Jobs: o.ProgressJobs, Interval: o.ProgressInterval, Duration: o.ProgressDuration, Refused: map[int]int{},
		TimerJobs: o.TimerJobs, TimerDeadline: o.TimerDeadline}
	for _, ns := range []string{progressNamespace, idleTimerNamespace, loadTimerNamespace} {
		if err := e.namespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	n := o.ProgressJobs
	begin := time.Now()
	if err := createMany(ctx, e.c, n, func(i int) client.Object {
		return benchJob(progressNamespace, fmt.Sprintf("tj-%05d", i), false, "1h")
	}); err != nil {
		return nil, err
	}
	pods, err := e.podsOf(ctx, progressNamespace, n)
	if err != nil {
		return nil, err
	}
	e.logf("progress: %d TrainJobs and their pods in %s", n, time.Since(begin).Round(time.Second))
	reporters, err := e.reporters(ctx, pods)
	if err != nil {
		return nil, err
	}
	hc, err := e.statusClient()
	if err != nil {
		return nil, err
	}

	// The idle baseline of the operator's timers.
	res.IdleDeadline, res.IdleMissed, err = e.timers(ctx, idleTimerNamespace, o.TimerJobs, o.TimerDeadline)
	if err != nil {
		return nil, err
	}
	e.logf("progress: idle deadlines p50 %s p99 %s (%d missed)", stats.Percentile(res.IdleDeadline, 50), stats.Percentile(res.IdleDeadline, 99), res.IdleMissed)

	seen := newStepWatch(progressNamespace)
	inf, err := e.cache.GetInformer(ctx, &trainer.TrainJob{})
	if err != nil {
		return nil, err
	}
	reg, err := inf.AddEventHandler(platform.EventHandlers(seen.on))
	if err != nil {
		return nil, err
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()

	pid, running := e.p.TrainerProcess().Running()
	if !running {
		return nil, fmt.Errorf("the operator is not running")
	}
	before, err := readProcUsage(pid)
	if err != nil {
		return nil, err
	}
	steps := int(o.ProgressDuration / o.ProgressInterval)
	start := time.Now()
	seen.begin(start)
	var wg sync.WaitGroup
	for i, r := range reporters {
		// Spread over the first interval, as independent trainers are.
		offset := time.Duration(i) * o.ProgressInterval / time.Duration(len(reporters))
		wg.Go(func() { r.run(ctx, hc, start.Add(offset), o.ProgressInterval, steps) })
	}
	// The timers that fall due under the load.
	type timerOut struct {
		lags   []time.Duration
		missed int
		err    error
	}
	timerDone := make(chan timerOut, 1)
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(o.ProgressDuration / 8):
		}
		lags, missed, err := e.timers(ctx, loadTimerNamespace, o.TimerJobs, o.TimerDeadline)
		timerDone <- timerOut{lags, missed, err}
	}()
	wg.Wait()
	loadEnd := time.Now()
	after, err := readProcUsage(pid)
	if err != nil {
		return nil, err
	}
	res.OperatorCPU, res.OperatorRSS = after.cpu-before.cpu, after.peakRSS
	t := <-timerDone
	if t.err != nil {
		return nil, t.err
	}
	res.LoadDeadline, res.LoadMissed = t.lags, t.missed
	res.StatusUpdates = seen.updatesUntil(loadEnd)

	// Every job's last accepted step must show, within the writer's bounded lag.
	last, accepted := map[string]int{}, map[string]int{}
	for _, r := range reporters {
		if s := r.lastAccepted(); s > 0 {
			last[r.job] = s
			accepted[r.job] = r.accepted()
		}
	}
	_ = waitFor(ctx, 2*time.Minute, "every job's last report in its status", func() (bool, string) {
		behind := seen.behind(last)
		return behind == 0, fmt.Sprintf("%d jobs behind", behind)
	})
	for _, r := range reporters {
		res.Posts += len(r.sent)
		for step, code := range r.code {
			switch code {
			case http.StatusOK:
				res.Accepted++
				res.PostLatency = append(res.PostLatency, r.rtt[step])
				if at, ok := seen.firstAtLeast(r.job, step+1); ok {
					res.Visible = append(res.Visible, at.Sub(r.sent[step]))
				} else {
					res.NeverVisible++
				}
			case 0:
				res.Failed++
			default:
				res.Refused[code]++
			}
		}
	}
	// Histories are written at most every HistoryInterval per job, and within their own
	// budget: wait until every job's holds its reports.
	complete := func() int {
		histories := &kiln.TrainJobMetricsList{}
		if err := e.c.List(ctx, histories, client.InNamespace(progressNamespace)); err != nil {
			return -1
		}
		return historiesComplete(histories.Items, accepted)
	}
	_ = waitFor(ctx, 5*time.Minute, "every job's history", func() (bool, string) {
		res.HistoryComplete = complete()
		return res.HistoryComplete == len(last), fmt.Sprintf("%d of %d complete", res.HistoryComplete, len(last))
	})
	res.HistoryLag = time.Since(loadEnd)
	for _, r := range reporters {
		if r.err != "" && len(res.Errors) < 3 && !slices.Contains(res.Errors, r.err) {
			res.Errors = append(res.Errors, r.err)
		}
	}
	e.logf("progress: %d posts in %s, %d accepted (%.0f/s), refused %v, %d failed; post round trip p50 %s p99 %s; post to status visible p50 %s p99 %s (%d never); %d status updates; %d of %d histories complete; operator CPU %.1f s",
		res.Posts, loadEnd.Sub(start).Round(time.Second), res.Accepted, float64(res.Accepted)/loadEnd.Sub(start).Seconds(), res.Refused, res.Failed,
		stats.Percentile(res.PostLatency, 50), stats.Percentile(res.PostLatency, 99), stats.Percentile(res.Visible, 50), stats.Percentile(res.Visible, 99), res.NeverVisible,
		res.StatusUpdates, res.HistoryComplete, n, res.OperatorCPU.Seconds())
	e.logf("progress: histories complete %s after the load; errors: %q", res.HistoryLag.Round(time.Second), res.Errors)
	e.logf("progress: deadlines under the load p50 %s p99 %s (%d missed)", stats.Percentile(res.LoadDeadline, 50), stats.Percentile(res.LoadDeadline, 99), res.LoadMissed)
	return res, nil
}

// podsOf waits until the n TrainJobs of ns each have a pod, and returns one per job.
func (e *env) podsOf(ctx context.Context, ns string, n int) (map[string]corev1.Pod, error) {
	out := map[string]corev1.Pod{}
	err := waitFor(ctx, 10*time.Minute, "a pod for every TrainJob", func() (bool, string) {
		pods := &corev1.PodList{}
		if err := e.c.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if job := p.Labels["jobset.sigs.k8s.io/jobset-name"]; job != "" && p.DeletionTimestamp == nil {
				out[job] = p
			}
		}
		return len(out) >= n, fmt.Sprintf("%d of %d", len(out), n)
	})
	return out, err
}

// reporter is one trainer: its job, its token, and what became of each of its posts.
type reporter struct {
	url, token, job string
	// err is the first error of a post never answered.
	err  string
	sent []time.Time
	rtt  []time.Duration
	code []int
}

// reporters asks for a token bound to each job's pod, with the job's audience, as the
// kubelet does for the projected volume the operator injects.
func (e *env) reporters(ctx context.Context, pods map[string]corev1.Pod) ([]*reporter, error) {
	cs, err := kubernetes.NewForConfig(e.cfg)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", e.p.OperatorStatus)
	var mu sync.Mutex
	var out []*reporter
	var errs []error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for job, pod := range pods {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			sa := pod.Spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			tr, err := cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
				Audiences:         []string{trainer.TokenAudience(pod.Namespace, job)},
				ExpirationSeconds: ptr.To[int64](trainer.StatusServerTokenExpirySeconds),
				BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			}}, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("a token for pod %s: %w", pod.Name, err))
				return
			}
			out = append(out, &reporter{url: url + trainer.StatusPath(pod.Namespace, job), token: tr.Status.Token, job: job})
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return out, nil
}

// statusClient trusts the platform's CA, as trainers trust the CA the operator injects.
func (e *env) statusClient() (*http.Client, error) {
	pem, err := os.ReadFile(e.p.PKI().CAFile())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", e.p.PKI().CAFile())
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConns:    512, MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512,
	}}, nil
}

// run posts steps reports, the i-th at first + i*interval (later if the previous one is
// still out, as a trainer's single poster is).
func (r *reporter) run(ctx context.Context, hc *http.Client, first time.Time, interval time.Duration, steps int) {
	r.sent, r.rtt, r.code = make([]time.Time, steps), make([]time.Duration, steps), make([]int, steps)
	for i := range steps {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(first.Add(time.Duration(i) * interval))):
		}
		step := i + 1
		body, _ := json.Marshal(trainer.UpdateTrainJobStatusRequest{TrainerStatus: &trainer.TrainerStatus{
			ProgressPercentage:        ptr.To(int32(step * 100 / steps)),
			EstimatedRemainingSeconds: ptr.To(int32((steps - step) * int(interval/time.Second))),
			Metrics: []trainer.Metric{
				{Name: kiln.MetricStep, Value: strconv.Itoa(step)}, {Name: kiln.MetricTotalSteps, Value: strconv.Itoa(steps)},
				{Name: "loss", Value: strconv.FormatFloat(2/float64(step), 'f', 4, 64)},
			},
			LastUpdatedTime: metav1.Now(),
		}})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+r.token)
		req.Header.Set("Content-Type", "application/json")
		r.sent[i] = time.Now()
		resp, err := hc.Do(req)
		r.rtt[i] = time.Since(r.sent[i])
		if err != nil {
			if r.err == "" {
				r.err = fmt.Sprintf("at %s: %v", time.Since(first).Round(time.Second), err)
			}
			continue
		}
		// Read to the end, so that the connection is kept, as kiln.progress keeps it.
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		r.code[i] = resp.StatusCode
	}
}

// accepted counts the posts answered 200.
func (r *reporter) accepted() int {
	n := 0
	for _, code := range r.code {
		if code == http.StatusOK {
			n++
		}
	}
	return n
}

// historiesComplete counts the histories whose loss series holds at least as many reports
// as their job's trainer had accepted. Not its last accepted step: a report refused on the
// way (429, 500) is in no history, and a post whose answer was lost may be.
func historiesComplete(histories []kiln.TrainJobMetrics, accepted map[string]int) int {
	n := 0
	for _, h := range histories {
		for _, s := range h.Series {
			if s.Name == "loss" && accepted[h.Name] > 0 && s.Count >= int64(accepted[h.Name]) {
				n++
			}
		}
	}
	return n
}

// lastAccepted is the step of the last post answered 200 (0 if none).
func (r *reporter) lastAccepted() int {
	for i := len(r.code) - 1; i >= 0; i-- {
		if r.code[i] == http.StatusOK {
			return i + 1
		}
	}
	return 0
}

// stepWatch records, per TrainJob of one namespace, each new step its trainerStatus showed
// and when the bench's watch saw it.
type stepWatch struct {
	ns      string
	mu      sync.Mutex
	start   time.Time
	updates []time.Time
	steps   map[string][]stepSeen
}

type stepSeen struct {
	step int
	at   time.Time
}

func newStepWatch(ns string) *stepWatch { return &stepWatch{ns: ns, steps: map[string][]stepSeen{}} }

func (w *stepWatch) begin(t time.Time) {
	w.mu.Lock()
	w.start = t
	w.mu.Unlock()
}

func (w *stepWatch) on(obj any, deleted bool) {
	now := time.Now()
	tj, ok := obj.(*trainer.TrainJob)
	if !ok || deleted || tj.Namespace != w.ns || tj.Status.TrainerStatus == nil {
		return
	}
	step := -1
	for _, m := range tj.Status.TrainerStatus.Metrics {
		if m.Name == kiln.MetricStep {
			step, _ = strconv.Atoi(m.Value)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.steps[tj.Name]
	if step < 0 || (len(seen) > 0 && seen[len(seen)-1].step >= step) {
		return
	}
	w.steps[tj.Name] = append(seen, stepSeen{step, now})
	w.updates = append(w.updates, now)
}

// firstAtLeast is when job's status first showed step or a later one.
func (w *stepWatch) firstAtLeast(job string, step int) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.steps[job] {
		if s.step >= step {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// behind counts the jobs whose status does not show their last step yet.
func (w *stepWatch) behind(last map[string]int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for job, step := range last {
		seen := w.steps[job]
		if len(seen) == 0 || seen[len(seen)-1].step < step {
			n++
		}
	}
	return n
}

func (w *stepWatch) updatesUntil(end time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, t := range w.updates {
		if !t.Before(w.start) && !t.After(end) {
			n++
		}
	}
	return n
}

// timers creates n running TrainJobs with activeDeadlineSeconds d in ns and returns the
// lag of each deadline (due to Failed/DeadlineExceeded seen) and how many never fired.
func (e *env) timers(ctx context.Context, ns string, n int, d time.Duration) ([]time.Duration, int, error) {
	if err := createMany(ctx, e.c, n, func(i int) client.Object {
		tj := benchJob(ns, fmt.Sprintf("tj-%05d", i), false, "1h")
		tj.Spec.ActiveDeadlineSeconds = ptr.To(int64(d / time.Second))
		return tj
	}); err != nil {
		return nil, 0, err
	}
	err := waitFor(ctx, d+2*time.Minute, "every deadline of "+ns, func() (bool, string) {
		got := e.tracker.count(e.tracker.deadlineSeen, ns)
		return got == n, fmt.Sprintf("%d of %d", got, n)
	})
	if err != nil {
		e.logf("%s: %v", ns, err)
	}
	return e.tracker.lags(e.tracker.deadlineSeen, e.tracker.deadlineDue, ns), n - e.tracker.count(e.tracker.deadlineSeen, ns), nil
}
