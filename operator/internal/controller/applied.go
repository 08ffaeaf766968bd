package controller

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kiln-ml/kiln/operator/internal/render"
)

// appliedJobSets remembers, per TrainJob, what this process last applied to its JobSet
// and the JobSet generation that write produced. A suspended TrainJob is reconciled on
// every status change of its JobSet; re-applying an unchanged rendering would cost an
// apiserver write and two admission webhook calls each time. The memory is only an
// optimisation: after a restart, or when anyone else changed the JobSet's spec (its
// generation moved), the JobSet is applied again.
type appliedJobSets struct {
	mu sync.Mutex
	m  map[types.NamespacedName]appliedJobSet
}

type appliedJobSet struct {
	uid        types.UID
	generation int64
	rendering  [sha256.Size]byte
}

// renderingHash identifies everything reconcileJobSet writes for a rendering.
func renderingHash(res *render.Result) ([sha256.Size]byte, error) {
	data, err := json.Marshal(struct {
		JobSet, Hostfile any
		SSH              bool
	}{res.JobSet, res.HostfileConfigMap, res.NeedsSSHSecret})
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("hashing the rendered JobSet: %w", err)
	}
	return sha256.Sum256(data), nil
}

// unchanged says that the JobSet (uid, generation) is what this process applied for
// the same rendering.
func (a *appliedJobSets) unchanged(tj types.NamespacedName, uid types.UID, generation int64, rendering [sha256.Size]byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	rec, ok := a.m[tj]
	return ok && rec.uid == uid && rec.generation == generation && rec.rendering == rendering
}

func (a *appliedJobSets) record(tj types.NamespacedName, rec appliedJobSet) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[types.NamespacedName]appliedJobSet{}
	}
	a.m[tj] = rec
}

func (a *appliedJobSets) forget(tj types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, tj)
}
