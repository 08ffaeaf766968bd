package trainjob

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kiln-ml/kiln/api/telemetry"
)

// stopParallel is how many JobSet deletions the stopper has under way at once: enough to
// spend the client's whole budget (200 requests/s) at a loaded apiserver's ~150 ms per request.
const stopParallel = 32

// jobsParallel is how many deletions of a stopped JobSet's Jobs are under way at once: few,
// so that when deadlines fall due together the client's budget goes first to the JobSet
// deletions (which stop the pods: the garbage collector deletes the rest) and to the
// reconciles' status writes, and the Jobs follow.
const jobsParallel = 4

// stopRetry bounds the wait between attempts at a deletion the apiserver refused.
const stopRetry = 10 * time.Second

// jobSetStopper deletes the JobSets (and their Jobs) of jobs that failed their deadline,
// outside the reconciles, up to stopParallel at once: in a reconcile each deletion held a
// worker for two round trips, so when many deadlines fell due together pods were told to
// stop at the rate the workers waited on the apiserver, not at the client's budget
// (docs/performance.md, "Deadlines falling due together").
// A deletion is retried until it succeeds or the JobSet is gone; the reconcile that asked
// does not wait, and one that asks again while it is under way is a no-op. The JobSet's
// Jobs are deleted after it, jobsParallel at once, so that they do not take the budget of
// the JobSet deletions that stop pods.
type jobSetStopper struct {
	client client.Client
	// ctx outlives the reconciles: the manager's (SetupWithManager), until then Background.
	ctx   context.Context
	slots chan struct{}
	// jobSlots bound the deletions of the Jobs, which follow their JobSet's.
	jobSlots chan struct{}

	mu       sync.Mutex
	underway map[types.UID]bool
	// wg counts the deletions under way (tests wait for them).
	wg sync.WaitGroup
}

func newJobSetStopper(c client.Client) *jobSetStopper {
	return &jobSetStopper{client: c, ctx: context.Background(), slots: make(chan struct{}, stopParallel), jobSlots: make(chan struct{}, jobsParallel), underway: map[types.UID]bool{}}
}

// stop deletes js and its Jobs in the background, unless that is under way already. The
// deletion is a span of the trace of ctx's span context (the TrainJob's), from this call to
// the deletion's success, with the attempts the apiserver refused as its events.
func (s *jobSetStopper) stop(ctx context.Context, js *jobsetv1alpha2.JobSet) {
	s.mu.Lock()
	if s.underway[js.UID] {
		s.mu.Unlock()
		return
	}
	s.underway[js.UID] = true
	s.mu.Unlock()
	log := klog.FromContext(ctx)
	key, uid := client.ObjectKeyFromObject(js), js.UID
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.SpanContextFromContext(ctx))
	start := time.Now()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.underway, uid)
			s.mu.Unlock()
		}()
		refused := s.retry(func() error { return s.deleteJobSet(key, uid) }, func(err error, wait time.Duration) {
			log.Error(err, "Deleting the JobSet of a TrainJob past its deadline; retrying", "jobSet", key, "retryIn", wait)
		})
		traceStop(parent, key, start, refused, s.ctx.Err())
		if s.ctx.Err() != nil {
			return
		}
		s.retry(func() error { return s.deleteJobs(key, uid) }, func(err error, wait time.Duration) {
			log.Error(err, "Deleting the Jobs of a deleted JobSet; retrying", "jobSet", key, "retryIn", wait)
		})
	}()
}

// retry calls do until it succeeds or the stopper stops, backing off between attempts; it
// returns the errors of the attempts refused.
func (s *jobSetStopper) retry(do func() error, refusedOnce func(error, time.Duration)) []error {
	var refused []error
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, stopRetry) {
		err := do()
		if err == nil {
			return refused
		}
		refused = append(refused, err)
		refusedOnce(err, wait)
		select {
		case <-s.ctx.Done():
			return refused
		case <-time.After(wait):
		}
	}
}

// traceStop records the stopper's deletion of a JobSet, asked at start, as a span under
// parent: the attempts the apiserver refused are its events; it failed when the operator
// stopped first (stopped is the reason).
func traceStop(parent context.Context, key client.ObjectKey, start time.Time, refused []error, stopped error) {
	_, span := telemetry.Tracer().Start(parent, "TrainJob pods stopped (JobSet deleted)", trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("k8s.namespace.name", key.Namespace),
			attribute.String("kiln.trainjob.name", key.Name),
			attribute.Int("kiln.stopper.attempts", len(refused)+1),
		))
	for _, err := range refused {
		span.AddEvent("refused", trace.WithAttributes(attribute.String("error", err.Error())))
	}
	if stopped != nil {
		span.SetStatus(codes.Error, "the operator stopped before the JobSet was deleted: "+stopped.Error())
	}
	span.End()
}

// deleteJobSet deletes the JobSet (that very one: its UID), in one of the slots.
func (s *jobSetStopper) deleteJobSet(key client.ObjectKey, uid types.UID) error {
	return s.inSlot(s.slots, func(ctx context.Context) error {
		js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		err := s.client.Delete(ctx, js, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// Gone already, or the name is another JobSet's now (the precondition failed):
			// nothing of this one is left to stop.
			return nil
		}
		return err
	})
}

// deleteJobs deletes the Jobs of the deleted JobSet key of that uid, in one of the Jobs'
// slots. The garbage collector would get to them only once it watches JobSets, which can take
// a while after JobSet is installed. The JobSet is already gone, so nothing recreates them;
// their pods get their grace period. JobSet labels its Jobs with its UID as well as its name:
// a JobSet of the same name created since (its TrainJob deleted and created again while this
// deletion waited for a slot) keeps its Jobs.
func (s *jobSetStopper) deleteJobs(key client.ObjectKey, uid types.UID) error {
	return s.inSlot(s.jobSlots, func(ctx context.Context) error {
		return s.client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(key.Namespace),
			client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: key.Name, jobsetv1alpha2.JobSetUIDKey: string(uid)},
			client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
}

// inSlot runs do in one of slots, with a request timeout; nothing once the stopper stopped.
func (s *jobSetStopper) inSlot(slots chan struct{}, do func(context.Context) error) error {
	select {
	case slots <- struct{}{}:
	case <-s.ctx.Done():
		return nil
	}
	defer func() { <-slots }()
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	return do(ctx)
}

// wait returns once no deletion is under way.
func (s *jobSetStopper) wait() { s.wg.Wait() }
