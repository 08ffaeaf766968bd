package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/api/kueue"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/internal/stats"
)

// tracker records, from watches, the instant the bench first saw each thing happen to
// each TrainJob (keyed by namespace/name). Instants are this process's clock when the
// watch event arrived, so every figure carries the same watch delay for every
// controller; the due instants come from the API's whole-second timestamps.
type tracker struct {
	mu sync.Mutex
	// JobSets: first seen, first seen running (spec.suspend false), and every UID seen
	// (more than one: the JobSet was created again).
	jobSetSeen    map[types.NamespacedName]time.Time
	jobSetResumed map[types.NamespacedName]time.Time
	jobSetUIDs    map[types.NamespacedName]map[types.UID]bool
	// jobSetGone: the JobSet seen deleted or deleting (its pods are told to stop).
	jobSetGone map[types.NamespacedName]time.Time
	// TrainJobs: DeadlineExceeded seen (and the instant it was due), deletion seen (and
	// the instant the TTL made it due), Complete seen.
	deadlineSeen map[types.NamespacedName]time.Time
	deadlineDue  map[types.NamespacedName]time.Time
	deletedSeen  map[types.NamespacedName]time.Time
	ttlDue       map[types.NamespacedName]time.Time
	finishedSeen map[types.NamespacedName]time.Time
	// resumedSeen: spec.suspend false seen on a TrainJob (Kueue's write, when queued).
	resumedSeen map[types.NamespacedName]time.Time
	// Workloads: first seen Admitted, by the TrainJob that owns them.
	admittedSeen map[types.NamespacedName]time.Time
}

func newTracker() *tracker {
	return &tracker{
		jobSetSeen: map[types.NamespacedName]time.Time{}, jobSetResumed: map[types.NamespacedName]time.Time{},
		jobSetUIDs: map[types.NamespacedName]map[types.UID]bool{}, deadlineSeen: map[types.NamespacedName]time.Time{},
		deadlineDue: map[types.NamespacedName]time.Time{}, deletedSeen: map[types.NamespacedName]time.Time{},
		ttlDue: map[types.NamespacedName]time.Time{}, finishedSeen: map[types.NamespacedName]time.Time{},
		jobSetGone:   map[types.NamespacedName]time.Time{},
		admittedSeen: map[types.NamespacedName]time.Time{}, resumedSeen: map[types.NamespacedName]time.Time{},
	}
}

func first(m map[types.NamespacedName]time.Time, k types.NamespacedName, t time.Time) {
	if _, ok := m[k]; !ok {
		m[k] = t
	}
}

// start registers the tracker's handlers on the cache's informers.
func (t *tracker) start(ctx context.Context, c cache.Cache) error {
	handlers := []struct {
		obj client.Object
		on  func(obj any, deleted bool)
	}{
		{&trainer.TrainJob{}, t.onTrainJob},
		{platform.UnstructuredOf(platform.JobSetGVK), t.onJobSet},
		{platform.UnstructuredOf(platform.WorkloadGVK), t.onWorkload},
	}
	for _, h := range handlers {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", h.obj, err)
		}
		if _, err := inf.AddEventHandler(platform.EventHandlers(h.on)); err != nil {
			return err
		}
	}
	return nil
}

func (t *tracker) onTrainJob(obj any, deleted bool) {
	now := time.Now()
	tj, ok := obj.(*trainer.TrainJob)
	if !ok {
		return
	}
	k := types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	if deleted || tj.DeletionTimestamp != nil {
		first(t.deletedSeen, k, now)
		return
	}
	if tj.Spec.Suspend != nil && !*tj.Spec.Suspend {
		first(t.resumedSeen, k, now)
	}
	for _, c := range tj.Status.Conditions {
		if c.Status != metav1.ConditionTrue || (c.Type != trainer.TrainJobComplete && c.Type != trainer.TrainJobFailed) {
			continue
		}
		first(t.finishedSeen, k, now)
		if c.Type == trainer.TrainJobFailed && c.Reason == trainer.TrainJobDeadlineExceededReason {
			first(t.deadlineSeen, k, now)
			if _, ok := t.deadlineDue[k]; !ok && tj.Spec.ActiveDeadlineSeconds != nil {
				t.deadlineDue[k] = activeSince(tj).Add(time.Duration(*tj.Spec.ActiveDeadlineSeconds) * time.Second)
			}
		}
	}
	if tj.Status.CompletionTime != nil && tj.Spec.TTLSecondsAfterFinished != nil {
		t.ttlDue[k] = tj.Status.CompletionTime.Add(time.Duration(*tj.Spec.TTLSecondsAfterFinished) * time.Second)
	}
}

// activeSince is the instant a controller counts a TrainJob's deadline from, by its own
// rule: Kiln's status.startTime; upstream, which has no startTime, counts from the last
// Suspended=False transition, else from creation.
func activeSince(tj *trainer.TrainJob) time.Time {
	if tj.Status.StartTime != nil {
		return tj.Status.StartTime.Time
	}
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended); c != nil && c.Status == metav1.ConditionFalse {
		return c.LastTransitionTime.Time
	}
	return tj.CreationTimestamp.Time
}

func (t *tracker) onJobSet(obj any, deleted bool) {
	now := time.Now()
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	k := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
	if deleted || u.GetDeletionTimestamp() != nil {
		t.mu.Lock()
		first(t.jobSetGone, k, now)
		t.mu.Unlock()
		return
	}
	suspended, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
	t.mu.Lock()
	defer t.mu.Unlock()
	first(t.jobSetSeen, k, now)
	if !suspended {
		first(t.jobSetResumed, k, now)
	}
	if t.jobSetUIDs[k] == nil {
		t.jobSetUIDs[k] = map[types.UID]bool{}
	}
	t.jobSetUIDs[k][u.GetUID()] = true
}

func (t *tracker) onWorkload(obj any, deleted bool) {
	now := time.Now()
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || deleted {
		return
	}
	var owner string
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == "TrainJob" {
			owner = ref.Name
		}
	}
	wl, err := kueue.Workload(u)
	if owner == "" || err != nil || kueue.AdmittedAt(wl) == nil {
		return
	}
	t.mu.Lock()
	first(t.admittedSeen, types.NamespacedName{Namespace: u.GetNamespace(), Name: owner}, now)
	t.mu.Unlock()
}

// count is how many keys of m are in namespace ns.
func (t *tracker) count(m map[types.NamespacedName]time.Time, ns string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k := range m {
		if k.Namespace == ns {
			n++
		}
	}
	return n
}

// countBefore is how many keys of m in namespace ns have an instant before t.
func (t *tracker) countBefore(m map[types.NamespacedName]time.Time, ns string, before time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, at := range m {
		if k.Namespace == ns && at.Before(before) {
			n++
		}
	}
	return n
}

// lags is, for every key of seen in ns, seen minus the instant in from (a due instant or
// an earlier observation); keys without both are skipped.
func (t *tracker) lags(seen, from map[types.NamespacedName]time.Time, ns string) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for k, s := range seen {
		if f, ok := from[k]; ok && k.Namespace == ns {
			out = append(out, s.Sub(f))
		}
	}
	return out
}

// dueSecond is the lags of the deadlines (or TTLs) that fell due in one second.
type dueSecond struct {
	// at is the second, from the first that anything fell due in.
	at   time.Duration
	lags []time.Duration
}

// lagsByDue groups the lags from from to seen in namespace ns by the second they fell due
// in, the first second first: where in the window a tail of lags sits.
func (t *tracker) lagsByDue(seen, from map[types.NamespacedName]time.Time, ns string) []dueSecond {
	t.mu.Lock()
	defer t.mu.Unlock()
	var first time.Time
	for k, f := range from {
		if _, ok := seen[k]; ok && k.Namespace == ns && (first.IsZero() || f.Before(first)) {
			first = f
		}
	}
	by := map[time.Duration]*dueSecond{}
	var out []*dueSecond
	for k, s := range seen {
		f, ok := from[k]
		if !ok || k.Namespace != ns {
			continue
		}
		at := f.Sub(first).Truncate(time.Second)
		if by[at] == nil {
			by[at] = &dueSecond{at: at}
			out = append(out, by[at])
		}
		by[at].lags = append(by[at].lags, s.Sub(f))
	}
	slices.SortFunc(out, func(a, b *dueSecond) int { return cmp.Compare(a.at, b.at) })
	res := make([]dueSecond, len(out))
	for i, d := range out {
		res[i] = *d
	}
	return res
}

// formatByDue is the seconds' lags in one line: each second's count, p50 and worst.
func formatByDue(secs []dueSecond) string {
	parts := make([]string, len(secs))
	for i, d := range secs {
		parts[i] = fmt.Sprintf("+%ds %d: p50 %.2fs max %.2fs", int(d.at/time.Second), len(d.lags),
			stats.Percentile(d.lags, 50).Seconds(), stats.Percentile(d.lags, 100).Seconds())
	}
	return strings.Join(parts, ", ")
}

// latest is the last instant in m for namespace ns.
func (t *tracker) latest(m map[types.NamespacedName]time.Time, ns string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for k, v := range m {
		if k.Namespace == ns && v.After(last) {
			last = v
		}
	}
	return last
}

// recreatedJobSets counts the JobSets of namespace ns that existed under more than one UID.
func (t *tracker) recreatedJobSets(ns string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, uids := range t.jobSetUIDs {
		if k.Namespace == ns && len(uids) > 1 {
			n++
		}
	}
	return n
}

// admittedAt is when the Workload of TrainJob k was first seen admitted.
func (t *tracker) admittedAt(k types.NamespacedName) (time.Time, bool) {
	return t.at(t.admittedSeen, k)
}

// jobSetResumedAt is when the JobSet of TrainJob k was first seen running.
func (t *tracker) jobSetResumedAt(k types.NamespacedName) (time.Time, bool) {
	return t.at(t.jobSetResumed, k)
}

func (t *tracker) at(m map[types.NamespacedName]time.Time, k types.NamespacedName) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := m[k]
	return at, ok
}
