package trainjob

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// expectationTimeout bounds how long a reconcile waits for the informer cache to show the
// controller's own write: past it, the cache is read as it is.
const expectationTimeout = 30 * time.Second

// expectations remember, per TrainJob, the writes of this process that the informer cache
// has not shown yet. A reconcile that reads the cache before it caught up with the
// controller's own write computes from the old objects: it writes a status it already wrote
// (and records its events twice), and it applies the JobSet it just created again.
// Such a reconcile is skipped; the watch event of the write requeues the TrainJob as soon
// as the cache has it. Like appliedJobSets, this is only an optimisation: a restart
// forgets it, and a timeout ends every expectation.
type expectations struct {
	mu sync.Mutex
	m  map[types.NamespacedName]expectation
}

type expectation struct {
	// writtenVersion is the TrainJob resourceVersion of this process's last status write:
	// while the cache holds an older one, the cache is behind. replacedVersion is the one
	// that write replaced, for resourceVersions that do not compare (an apiserver that is
	// not backed by etcd): the cache is behind while it holds that one.
	writtenVersion, replacedVersion string
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
		deleteKey(&e.m, tj)
		return false
	}
	if exp.writtenVersion != "" && !older(resourceVersion, exp.writtenVersion, exp.replacedVersion) {
		exp.writtenVersion, exp.replacedVersion = "", ""
	}
	if exp.jobSet != "" && js != nil && js.UID == exp.jobSet {
		exp.jobSet = ""
	}
	if exp.writtenVersion == "" && exp.jobSet == "" {
		deleteKey(&e.m, tj)
		return false
	}
	e.m[tj] = exp
	return true
}

// older says whether the cached resourceVersion precedes written, the controller's own
// write. Status writes are patches that need no particular version, so someone else's
// write may come between the version the controller read (replaced) and its own: the
// cache showing that one is still behind.
func older(cached, written, replaced string) bool {
	if c, err := resourceversion.CompareResourceVersion(cached, written); err == nil {
		return c < 0
	}
	return cached == replaced
}

// statusWritten records that a status write replaced the TrainJob at replaced with written.
func (e *expectations) statusWritten(tj types.NamespacedName, replaced, written string, now time.Time) {
	e.update(tj, now, func(exp *expectation) { exp.writtenVersion, exp.replacedVersion = written, replaced })
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
	deleteKey(&e.m, tj)
}

// deleteKey deletes key from *m and drops the map once it is empty: a Go map keeps room for
// the most entries it ever held, and 10,000 jobs created together would keep theirs for good.
func deleteKey[K comparable, V any](m *map[K]V, key K) {
	delete(*m, key)
	if len(*m) == 0 {
		*m = nil
	}
}
