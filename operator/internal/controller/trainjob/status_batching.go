package trainjob

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// errTrainJobGone: the TrainJob was deleted before its status could be written.
var errTrainJobGone = errors.New("TrainJob deleted")

// writeStatus writes st as the TrainJob's status, once, unless it is unchanged or the
// change only mirrors and may wait for its batch: then it returns how long it may wait
// (the job must be reconciled again by then).
//
// The write is a merge patch of what changed, at no particular version: the status is this
// controller's alone, and a write of someone else's (Kueue's spec.suspend, say) in between
// is no reason to refuse it. That write's own event reconciles the job again.
func (r *Reconciler) writeStatus(ctx context.Context, tj *trainer.TrainJob, st *trainer.TrainJobStatus) (time.Duration, error) {
	key := client.ObjectKeyFromObject(tj)
	if apiequality.Semantic.DeepEqual(&tj.Status, st) || quietMirror(&tj.Status, st) {
		r.batches.forget(key)
		return 0, nil
	}
	if wait := r.batches.wait(key, mirrorOnly(&tj.Status, st), r.clock.Now()); wait > 0 {
		return wait, nil
	}
	read := tj.DeepCopy()
	tj.Status = *st
	if err := r.client.Status().Patch(ctx, tj, client.MergeFrom(read)); apierrors.IsNotFound(err) {
		return 0, errTrainJobGone
	} else if err != nil {
		return 0, fmt.Errorf("writing status: %w", err)
	}
	r.expect.statusWritten(key, read.ResourceVersion, tj.ResourceVersion, r.clock.Now())
	return 0, nil
}

// afterBatch makes sure that a status change left for its batch is written when the batch
// ends: the job is reconciled again then, unless it already is sooner. At the default
// priority, not a timer's: batches must not hold up the deadlines and TTLs that fall due
// meanwhile, and that reconcile sets the job's timer again.
func afterBatch(res reconcile.Result, err error, batched time.Duration) (reconcile.Result, error) {
	if err != nil || batched == 0 || (res.RequeueAfter > 0 && res.RequeueAfter <= batched) {
		return res, err
	}
	return reconcile.Result{RequeueAfter: batched}, nil
}

// statusBatchPeriod is how long a status change that only mirrors the JobSet's counts
// within their state (jobsStatus) or a newer spec generation (the conditions' observedGeneration) may wait for
// the next one, so that one write carries several: a JobSet's counts change a few times
// within a second as its Jobs start, become ready and finish, and Kueue's admission writes
// the spec twice. The Job controller batches its pod updates the same way, for the same
// second. A change that means something (a condition, startTime, completionTime) is
// written at once, with whatever mirrored change waits.
const statusBatchPeriod = time.Second

// mirrorOnly says whether status after differs from before only in what it mirrors, within
// the same state of each replicated job's pods: the counts may wait for their batch, a
// transition a client can wait for (a Job's pods now active, ready, succeeded or failed,
// or no longer) may not, or a fleet whose pods are ready within the second would never
// show them active and not yet ready, as upstream's controller shows them while images pull.
func mirrorOnly(before, after *trainer.TrainJobStatus) bool {
	if !maps.Equal(podStates(before.JobsStatus), podStates(after.JobsStatus)) {
		return false
	}
	strip := func(st *trainer.TrainJobStatus) *trainer.TrainJobStatus {
		st = st.DeepCopy()
		st.JobsStatus = nil
		for i := range st.Conditions {
			st.Conditions[i].ObservedGeneration = 0
		}
		return st
	}
	return apiequality.Semantic.DeepEqual(strip(before), strip(after))
}

// quietMirror says whether status after differs from before only in mirrored figures that
// nobody acts on: the JobSet's count of suspended Jobs, or entries of zeros where there were
// none (a JobSet just created, suspended). Under load each was a write of its own between the
// ones that mean something (the JobSet created suspended; resumed, its count still
// "suspended: 1" for a moment). Such a change is not written alone: it rides with the next
// write, which comes with the next pod started or finished, or the job's next transition.
// The pods' counts (active, ready, succeeded, failed) are never quiet: users, the job's
// state and Kueue (active pods, reclaimable pods) read them.
func quietMirror(before, after *trainer.TrainJobStatus) bool {
	b, a := *before, *after // shallow: only compared, the one field set aside
	b.JobsStatus, a.JobsStatus = nil, nil
	if !apiequality.Semantic.DeepEqual(&b, &a) {
		return false
	}
	return maps.Equal(podCounts(before.JobsStatus), podCounts(after.JobsStatus))
}

// podStates is, per replicated job, which of its pod counts (active, ready, succeeded,
// failed) are not zero: the state a client waits for, where the counts themselves may move
// within it. A job with none of any is left out, as is one not listed.
func podStates(jobs []trainer.JobStatus) map[string][4]bool {
	out := map[string][4]bool{}
	for name, c := range podCounts(jobs) {
		out[name] = [4]bool{c[0] > 0, c[1] > 0, c[2] > 0, c[3] > 0}
	}
	return out
}

// podCounts are the pods of each replicated job that are active, ready, succeeded and
// failed; a job with none of any is left out, as is one not listed.
func podCounts(jobs []trainer.JobStatus) map[string][4]int32 {
	out := map[string][4]int32{}
	for _, j := range jobs {
		c := [4]int32{ptr.Deref(j.Active, 0), ptr.Deref(j.Ready, 0), ptr.Deref(j.Succeeded, 0), ptr.Deref(j.Failed, 0)}
		if c != [4]int32{} {
			out[j.Name] = c
		}
	}
	return out
}

// statusBatches remember, per TrainJob, since when a mirror-only status change waits.
// Like expectations, it is only an optimisation: a restart forgets it, and the change is
// then written a period later.
type statusBatches struct {
	mu sync.Mutex
	m  map[types.NamespacedName]time.Time
}

// wait says how much longer the TrainJob's status change (mirror-only or not) may wait
// before it is written; 0 is now.
func (b *statusBatches) wait(tj types.NamespacedName, mirror bool, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	since, waiting := b.m[tj]
	switch {
	case !mirror:
	case !waiting:
		if b.m == nil {
			b.m = map[types.NamespacedName]time.Time{}
		}
		b.m[tj] = now
		return statusBatchPeriod
	case now.Sub(since) < statusBatchPeriod:
		return statusBatchPeriod - now.Sub(since)
	}
	deleteKey(&b.m, tj)
	return 0
}

func (b *statusBatches) forget(tj types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	deleteKey(&b.m, tj)
}
