package controller

import (
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// mirrorBatchPeriod is how long a status change that only mirrors the JobSet's counts
// (jobsStatus) or a newer spec generation (the conditions' observedGeneration) may wait for
// the next one, so that one write carries several: a JobSet's counts change a few times
// within a second as its Jobs start, become ready and finish, and Kueue's admission writes
// the spec twice. The Job controller batches its pod updates the same way, for the same
// second. A change that means something (a condition, startTime, completionTime) is
// written at once, with whatever mirrored change waits.
const mirrorBatchPeriod = time.Second

// mirrorOnly says whether status after differs from before only in what it mirrors.
func mirrorOnly(before, after *trainer.TrainJobStatus) bool {
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

// mirrorBatches remember, per TrainJob, since when a mirror-only status change waits.
// Like expectations, it is only an optimisation: a restart forgets it, and the change is
// then written a period later.
type mirrorBatches struct {
	mu sync.Mutex
	m  map[types.NamespacedName]time.Time
}

// wait says how much longer the TrainJob's status change (mirror-only or not) may wait
// before it is written; 0 is now.
func (b *mirrorBatches) wait(tj types.NamespacedName, mirror bool, now time.Time) time.Duration {
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
		return mirrorBatchPeriod
	case now.Sub(since) < mirrorBatchPeriod:
		return mirrorBatchPeriod - now.Sub(since)
	}
	delete(b.m, tj)
	return 0
}

func (b *mirrorBatches) forget(tj types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, tj)
}
