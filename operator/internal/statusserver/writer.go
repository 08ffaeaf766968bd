package statusserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// The status server writes a TrainJob's trainerStatus and its TrainJobMetrics.
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=kiln.dev,resources=trainjobmetrics,verbs=get;list;watch;create;update;patch

// FieldManager is the field manager of the status server's writes.
const FieldManager = "kiln-status-server"

// WriterOptions bound what the writer asks of the Kubernetes API.
type WriterOptions struct {
	// StatusInterval is the least time between two writes of one job's trainerStatus:
	// reports in between are coalesced, the latest wins.
	StatusInterval time.Duration
	// HistoryInterval is the least time between two writes of one job's history: its
	// reports wait in memory meanwhile (and are written on shutdown).
	HistoryInterval time.Duration
	// HistoryQPS bounds the history writes of all jobs together (0: only the client's
	// QPS does), so that the status writes keep most of the budget: under load a job's
	// history is written less often than HistoryInterval, never its status.
	HistoryQPS float64
	// Workers write in parallel; the client's own rate limit bounds them together.
	Workers int
	// RequestTimeout bounds each write (0: requestTimeout). A write the apiserver never
	// answers (a stream it dropped, a connection gone silent) would otherwise hold the job's
	// key in the work queue, and with it every later report of the job, until the connection's
	// health check gives up on it; timed out, it is retried as any failed write.
	RequestTimeout time.Duration
}

// requestTimeout bounds each call the status server makes to the Kubernetes API.
const requestTimeout = 10 * time.Second

func (o *WriterOptions) defaults() {
	if o.StatusInterval <= 0 {
		o.StatusInterval = time.Second
	}
	if o.HistoryInterval <= 0 {
		o.HistoryInterval = 10 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = requestTimeout
	}
}

// writer coalesces each job's reports and writes them through its own client, so that a
// thousand chatty trainers cost at most one status write per job per StatusInterval and one
// history write per HistoryInterval, within the client's QPS, and never the controller's.
type writer struct {
	client client.Client
	clock  clock.WithTicker
	opts   WriterOptions
	queue  workqueue.TypedDelayingInterface[types.NamespacedName]
	// history is HistoryQPS's budget (nil: none).
	history *rate.Limiter

	mu   sync.Mutex
	jobs map[types.NamespacedName]*pending
}

// pending is what the writer holds for one job.
type pending struct {
	// status is the newest trainerStatus not yet written, nil when written.
	status *trainer.TrainerStatus
	// received is when the oldest report of status arrived (for the write lag).
	received time.Time
	// reports are the reports not yet in the stored history.
	reports []report
	// history is the stored history as last read or written; nil until needed.
	history *kiln.TrainJobMetrics
	uid     types.UID
	// lastStatus and lastHistory are when they were last written.
	lastStatus, lastHistory time.Time
	// touched is when the job last reported: a job silent for long is forgotten.
	touched time.Time
	// failedStatus and failedHistory count the writes that failed in a row: the first
	// failure of a run, and every failedLogEvery-th, are logged at the default verbosity.
	failedStatus, failedHistory int
}

// failedLogEvery: a write failing for good (retried every second) says so once a minute or so.
const failedLogEvery = 60

// logFailure logs a failed write at the default verbosity when it starts a run of failures
// or the run goes on, else at V(2); failed counts it (w.mu held by the caller).
func logFailure(log klog.Logger, failed *int, what string, err error) {
	*failed++
	if *failed == 1 || *failed%failedLogEvery == 0 {
		log.Info("Writing the "+what+" failed; retrying every second", "err", err, "failedInARow", *failed)
		return
	}
	log.V(2).Info("Writing the "+what+" failed; retrying", "err", err, "failedInARow", *failed)
}

// logRecovery logs a write that succeeded after failures (w.mu held by the caller).
func logRecovery(log klog.Logger, failed *int, what string) {
	if *failed > 0 {
		log.Info("Wrote the "+what+" after failed attempts", "failedInARow", *failed)
		*failed = 0
	}
}

func newWriter(c client.Client, clk clock.WithTicker, opts WriterOptions) *writer {
	opts.defaults()
	var history *rate.Limiter
	if opts.HistoryQPS > 0 {
		history = rate.NewLimiter(rate.Limit(opts.HistoryQPS), max(int(opts.HistoryQPS), 1))
	}
	return &writer{
		client: c, clock: clk, opts: opts, history: history,
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.NamespacedName]{Name: "kiln_status_server", Clock: clk}),
		jobs:  map[types.NamespacedName]*pending{},
	}
}

// add takes an accepted report for job: it is written within StatusInterval of the last
// write of that job's status.
func (w *writer) add(job types.NamespacedName, ts *trainer.TrainerStatus) {
	now := w.clock.Now()
	w.mu.Lock()
	p := w.jobs[job]
	if p == nil {
		p = &pending{}
		w.jobs[job] = p
	}
	if p.status == nil {
		p.received = now
	}
	p.status = ts
	p.touched = now
	if len(p.reports) < 10*kiln.MaxPointsPerSeries {
		p.reports = append(p.reports, reportOf(ts))
	}
	wait := p.lastStatus.Add(w.opts.StatusInterval).Sub(now)
	w.mu.Unlock()
	w.queue.AddAfter(job, max(wait, 0))
}

// run writes until ctx ends, then writes what is left (within a few seconds).
func (w *writer) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range w.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w.next(ctx, false) {
			}
		}()
	}
	go w.sweep(ctx)
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
	w.flushAll()
}

// flushAll writes every job's pending status and history now (on shutdown), so that a
// restart loses no report that was answered 200.
func (w *writer) flushAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.mu.Lock()
	var keys []types.NamespacedName
	for k, p := range w.jobs {
		if p.status != nil || len(p.reports) > 0 {
			keys = append(keys, k)
		}
	}
	w.mu.Unlock()
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		w.write(ctx, k, true)
	}
}

// sweep forgets jobs that reported nothing for a while (their history is re-read on the
// next report).
func (w *writer) sweep(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.clock.After(time.Minute):
		}
		cutoff := w.clock.Now().Add(-10 * time.Minute)
		w.mu.Lock()
		for k, p := range w.jobs {
			if p.status == nil && len(p.reports) == 0 && p.touched.Before(cutoff) {
				delete(w.jobs, k)
			}
		}
		w.mu.Unlock()
	}
}

func (w *writer) next(ctx context.Context, final bool) bool {
	job, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(job)
	w.write(ctx, job, final)
	return true
}

// write writes what is due of one job: its status, then its history if due (or final).
func (w *writer) write(ctx context.Context, job types.NamespacedName, final bool) {
	log := klog.FromContext(ctx).WithValues("trainJob", job)
	now := w.clock.Now()
	w.mu.Lock()
	p := w.jobs[job]
	if p == nil {
		w.mu.Unlock()
		return
	}
	ts, received := p.status, p.received
	statusDue := ts != nil && (final || !now.Before(p.lastStatus.Add(w.opts.StatusInterval)))
	if statusDue {
		p.status = nil
	}
	historyDue := len(p.reports) > 0 && (final || !now.Before(p.lastHistory.Add(w.opts.HistoryInterval)))
	w.mu.Unlock()
	// Over the history budget: the reports wait (in memory) for their turn.
	var historyWait time.Duration
	if historyDue && !final && w.history != nil {
		if r := w.history.ReserveN(now, 1); !r.OK() || r.DelayFrom(now) > 0 {
			historyWait = max(r.DelayFrom(now), time.Second/time.Duration(max(int(w.opts.HistoryQPS), 1)))
			r.CancelAt(now)
			historyDue = false
		}
	}

	if statusDue {
		uid, err := w.writeStatus(ctx, job, ts)
		if errors.Is(err, context.DeadlineExceeded) {
			log.Info("Writing the trainer status took longer than its timeout; retrying", "timeout", w.opts.RequestTimeout)
		}
		w.mu.Lock()
		switch {
		case apierrors.IsNotFound(err):
			delete(w.jobs, job)
			w.mu.Unlock()
			observeWrite("status", "gone")
			log.V(2).Info("The TrainJob is gone; its reports are dropped")
			return
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			// Validated before it was accepted: the CRD must have changed. Nothing to retry.
			log.Error(err, "The apiserver refused a trainer status the status server accepted")
			observeWrite("status", "invalid")
		case err != nil:
			if p.status == nil {
				p.status, p.received = ts, received
			}
			logFailure(log, &p.failedStatus, "trainer status", err)
			w.mu.Unlock()
			observeWrite("status", "error")
			w.queue.AddAfter(job, time.Second)
			return
		default:
			p.lastStatus, p.uid = now, uid
			logRecovery(log, &p.failedStatus, "trainer status")
			observeWrite("status", "ok")
			observeLag(w.clock.Since(received))
		}
		w.mu.Unlock()
		if err == nil {
			log.V(2).Info("Wrote the trainer status", "progressPercentage", ptr.Deref(ts.ProgressPercentage, -1), "lastUpdatedTime", ts.LastUpdatedTime.Time, "lag", w.clock.Since(received))
		}
	}
	if historyDue {
		if err := w.writeHistory(ctx, job, p); apierrors.IsNotFound(err) {
			observeWrite("history", "gone")
			if w.jobGone(ctx, job, p) {
				log.V(2).Info("The TrainJob is gone; its reports are dropped")
				return
			}
			// The history, not the job, was gone (deleted, or refused as another's): it
			// is read and written again, and what waits for it and the status is kept.
			log.V(2).Info("The metrics history was gone; writing it again", "err", err)
			w.queue.AddAfter(job, time.Second)
			return
		} else if err != nil {
			observeWrite("history", "error")
			w.mu.Lock()
			logFailure(log, &p.failedHistory, "metrics history", err)
			w.mu.Unlock()
			w.queue.AddAfter(job, time.Second)
			return
		}
		observeWrite("history", "ok")
		w.mu.Lock()
		logRecovery(log, &p.failedHistory, "metrics history")
		w.mu.Unlock()
	}
	// More arrived meanwhile, or the history waits for its interval.
	w.mu.Lock()
	var again time.Duration = -1
	if p.status != nil {
		again = max(p.lastStatus.Add(w.opts.StatusInterval).Sub(w.clock.Now()), 0)
	}
	if len(p.reports) > 0 {
		h := max(p.lastHistory.Add(w.opts.HistoryInterval).Sub(w.clock.Now()), historyWait, 0)
		if again < 0 || h < again {
			again = h
		}
	}
	w.mu.Unlock()
	if again >= 0 && !final {
		w.queue.AddAfter(job, again)
	}
}

// jobGone says whether the TrainJob of p is gone (being deleted, or another of its name
// replaced it), and then forgets it. Otherwise it keeps p, with its history to be read again.
func (w *writer) jobGone(ctx context.Context, job types.NamespacedName, p *pending) bool {
	ctx, cancel := context.WithTimeout(ctx, w.opts.RequestTimeout)
	defer cancel()
	tj := &trainer.TrainJob{}
	err := w.client.Get(ctx, job, tj)
	w.mu.Lock()
	defer w.mu.Unlock()
	if apierrors.IsNotFound(err) || (err == nil && (!tj.DeletionTimestamp.IsZero() || (p.uid != "" && tj.UID != p.uid))) {
		if w.jobs[job] == p {
			delete(w.jobs, job)
		}
		return true
	}
	p.history, p.uid = nil, ""
	return false
}

// writeStatus replaces the TrainJob's status.trainerStatus (a merge patch of the status
// subresource, at no particular version: the field is the status server's alone).
func (w *writer) writeStatus(ctx context.Context, job types.NamespacedName, ts *trainer.TrainerStatus) (types.UID, error) {
	// Every field, absent ones as null, so that the patch replaces the whole trainerStatus.
	body := map[string]any{
		"progressPercentage":        ts.ProgressPercentage,
		"estimatedRemainingSeconds": ts.EstimatedRemainingSeconds,
		"metrics":                   ts.Metrics,
		"lastUpdatedTime":           ts.LastUpdatedTime,
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"trainerStatus": body}})
	if err != nil {
		return "", err
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name}}
	ctx, cancel := context.WithTimeout(ctx, w.opts.RequestTimeout)
	defer cancel()
	err = w.client.Status().Patch(ctx, tj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
	return tj.UID, err
}

// writeHistory folds the job's pending reports into its TrainJobMetrics and stores it,
// creating it (owned by the TrainJob) on the first write, reading it again on a conflict
// (another replica of the operator wrote it too).
func (w *writer) writeHistory(ctx context.Context, job types.NamespacedName, p *pending) error {
	// Its few calls together, bounded as one write is.
	ctx, cancel := context.WithTimeout(ctx, 2*w.opts.RequestTimeout)
	defer cancel()
	w.mu.Lock()
	reports := p.reports
	p.reports = nil
	stored, uid := p.history, p.uid
	w.mu.Unlock()
	restore := func() {
		w.mu.Lock()
		p.reports = append(reports, p.reports...)
		w.mu.Unlock()
	}
	if uid == "" {
		tj := &trainer.TrainJob{}
		if err := w.client.Get(ctx, job, tj); err != nil {
			restore()
			return err
		}
		uid = tj.UID
	}
	loaded := stored != nil
	for range 4 {
		if !loaded {
			var err error
			if stored, err = w.readHistory(ctx, job, uid); err != nil {
				restore()
				return err
			}
		}
		var next *kiln.TrainJobMetrics
		if stored != nil {
			next = stored.DeepCopy()
		} else {
			next = &kiln.TrainJobMetrics{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: job.Name, UID: uid,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
				}},
			}}
		}
		fold(next, reports)
		var err error
		if stored == nil {
			err = w.client.Create(ctx, next, client.FieldOwner(FieldManager))
		} else {
			err = w.client.Update(ctx, next, client.FieldOwner(FieldManager))
		}
		switch {
		case err == nil:
			w.mu.Lock()
			p.history, p.lastHistory, p.uid = next, w.clock.Now(), uid
			w.mu.Unlock()
			return nil
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			loaded = false
		case apierrors.IsNotFound(err) || isOwnerGone(err):
			restore()
			return apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), job.Name)
		default:
			restore()
			return fmt.Errorf("storing the metrics history: %w", err)
		}
	}
	restore()
	return fmt.Errorf("storing the metrics history: it kept changing under this writer")
}

// readHistory reads the job's stored history: nil when there is none. One left by a
// deleted TrainJob of the same name (not yet collected) is deleted.
func (w *writer) readHistory(ctx context.Context, job types.NamespacedName, uid types.UID) (*kiln.TrainJobMetrics, error) {
	stored := &kiln.TrainJobMetrics{}
	if err := w.client.Get(ctx, job, stored); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if metav1.IsControlledBy(stored, &metav1.ObjectMeta{UID: uid}) {
		return stored, nil
	}
	if err := w.client.Delete(ctx, stored, client.Preconditions{UID: &stored.UID}); client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	return nil, nil
}

// isOwnerGone: creating an object owned by a TrainJob being deleted is refused.
func isOwnerGone(err error) bool {
	return apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, metav1.CauseTypeFieldValueNotFound)
}
