package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// expectationTimeout bounds how long a reconcile waits for the informer cache to show the
// controller's own write: past it, the cache is read as it is.
const expectationTimeout = 30 * time.Second

// expectations remember, per TrainJob, the writes of this process that the informer cache
// has not shown yet. A reconcile that reads the cache before it caught up with the
// controller's own write computes from the old objects: its status write is refused with a
// conflict, and it applies the JobSet it just created again (and records "Created" twice).
// Such a reconcile is skipped; the watch event of the write requeues the TrainJob as soon
// as the cache has it. Like appliedJobSets, this is only an optimisation: a restart
// forgets it, and a timeout ends every expectation.
type expectations struct {
	mu sync.Mutex
	m  map[types.NamespacedName]expectation
}

type expectation struct {
	// replacedVersion is the TrainJob resourceVersion that this process's last status write
	// replaced: while the cache still holds it, the cache is behind.
	replacedVersion string
	// jobSet is the UID of the JobSet this process created, until the cache shows it.
	jobSet types.UID
	since  time.Time
}

// pending says whether the cached TrainJob (at resourceVersion) and JobSet (nil when the
// cache has none) are older than what this process wrote, and forgets what they caught up with.
func (e *expectations) pending(tj types.NamespacedName, resourceVersion string, js *jobsetv1alpha2.JobSet, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.m[tj]
	if !ok {
		return false
	}
	if now.Sub(exp.since) > expectationTimeout {
		delete(e.m, tj)
		return false
	}
	if exp.replacedVersion != "" && exp.replacedVersion != resourceVersion {
		exp.replacedVersion = ""
	}
	if exp.jobSet != "" && js != nil && js.UID == exp.jobSet {
		exp.jobSet = ""
	}
	if exp.replacedVersion == "" && exp.jobSet == "" {
		delete(e.m, tj)
		return false
	}
	e.m[tj] = exp
	return true
}

// statusWritten records that a status write replaced the TrainJob at resourceVersion.
func (e *expectations) statusWritten(tj types.NamespacedName, resourceVersion string, now time.Time) {
	e.update(tj, now, func(exp *expectation) { exp.replacedVersion = resourceVersion })
}

// jobSetCreated records that this process created the TrainJob's JobSet with uid.
func (e *expectations) jobSetCreated(tj types.NamespacedName, uid types.UID, now time.Time) {
	e.update(tj, now, func(exp *expectation) { exp.jobSet = uid })
}

func (e *expectations) update(tj types.NamespacedName, now time.Time, f func(*expectation)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[types.NamespacedName]expectation{}
	}
	exp := e.m[tj]
	f(&exp)
	exp.since = now
	e.m[tj] = exp
}

func (e *expectations) forget(tj types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, tj)
}
