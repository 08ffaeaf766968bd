package trainjob

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/render"
)

func TestSnapshotSpecs(t *testing.T) {
	job := func(name, uid string) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	}
	snapshotOf := func(tj *trainer.TrainJob, deadline int64) *corev1.ConfigMap {
		data, err := yaml.Marshal(&trainer.RuntimeSnapshot{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch",
			Spec: trainer.TrainingRuntimeSpec{RunPolicy: &trainer.RunPolicy{ActiveDeadlineSeconds: ptr.To(deadline)}}})
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: snapshotName(tj), OwnerReferences: []metav1.OwnerReference{render.OwnerReference(tj)}},
			Data:       map[string]string{trainer.RuntimeSnapshotKey: string(data)},
		}
	}
	var s snapshotSpecs
	a, b := job("a", "ua"), job("b", "ub")
	if _, ok := s.get(a); ok {
		t.Fatal("nothing decoded yet")
	}
	specA, err := s.decode(a, snapshotOf(a, 60))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.decode(b, snapshotOf(b, 60)); err != nil {
		t.Fatal(err)
	}
	if s.byJob[client.ObjectKeyFromObject(a)].spec != s.byJob[client.ObjectKeyFromObject(b)].spec {
		t.Fatal("two jobs with equal snapshots hold two decoded copies")
	}
	got, ok := s.get(a)
	if !ok || *got.RunPolicy.ActiveDeadlineSeconds != 60 || *specA.RunPolicy.ActiveDeadlineSeconds != 60 {
		t.Fatalf("get = %v, %v", got, ok)
	}
	*got.RunPolicy.ActiveDeadlineSeconds = 1 // a caller's change stays its own
	if again, _ := s.get(b); *again.RunPolicy.ActiveDeadlineSeconds != 60 {
		t.Fatal("a caller's change reached another job's snapshot")
	}
	if _, ok := s.get(job("a", "other")); ok {
		t.Fatal("a new TrainJob of the same name got the deleted one's snapshot")
	}
	if _, err := s.decode(a, snapshotOf(b, 60)); err == nil {
		t.Fatal("a ConfigMap owned by another TrainJob was accepted as this one's snapshot")
	}
	c := job("c", "uc")
	bad := snapshotOf(c, 60)
	bad.Data[trainer.RuntimeSnapshotKey] = "kind: x\nunknownField: 1\n"
	if _, err := s.decode(c, bad); err == nil {
		t.Fatal("a snapshot with unknown fields decoded")
	}
	s.forget(client.ObjectKeyFromObject(a))
	if _, ok := s.get(a); ok {
		t.Fatal("forgotten, yet found")
	}
}

// After a restart the jobs' snapshots come from one list (in pages), not a read per job,
// and a job pinned before the restart keeps its snapshot though its runtime changed since.
func TestPinnedRuntimeAfterARestart(t *testing.T) {
	scheme := snapshotScheme(t)
	job := func(name string) *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name)},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch"}}}
	}
	spec := func(deadline int64) trainer.TrainingRuntimeSpec {
		return trainer.TrainingRuntimeSpec{RunPolicy: &trainer.RunPolicy{ActiveDeadlineSeconds: ptr.To(deadline)}}
	}
	snapshot := func(name string, owner *trainer.TrainJob, deadline int64) *corev1.ConfigMap {
		data, err := yaml.Marshal(&trainer.RuntimeSnapshot{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch", Spec: spec(deadline)})
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{trainer.LabelRuntimeSnapshot: "true"},
				OwnerReferences: []metav1.OwnerReference{render.OwnerReference(owner)}},
			Data: map[string]string{trainer.RuntimeSnapshotKey: string(data)},
		}
	}
	a, b, c, d, fresh := job("a"), job("b"), job("c"), job("d"), job("fresh")
	objs := []client.Object{
		// The runtime as it is now: edited since a, b and c were pinned to a deadline of 60 s.
		&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}, Spec: spec(600)},
		snapshot(snapshotName(a), a, 60), snapshot(snapshotName(b), b, 60), snapshot(snapshotName(c), c, 60),
		// Labelled and owned by d, but not under d's snapshot name: not d's snapshot.
		snapshot("elsewhere", d, 60),
	}
	var lists, pages, gets int
	base := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	c2 := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				gets++
			}
			return cl.Get(ctx, key, obj, opts...)
		},
		// Two snapshots a page, whatever the limit asked: the load must follow the pages.
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			cms, ok := list.(*corev1.ConfigMapList)
			if !ok {
				return cl.List(ctx, list, opts...)
			}
			o := (&client.ListOptions{}).ApplyOptions(opts)
			if o.Continue == "" {
				lists++
			}
			pages++
			if err := cl.List(ctx, cms, opts...); err != nil {
				return err
			}
			from, _ := strconv.Atoi(o.Continue)
			all := len(cms.Items)
			to := min(from+2, all)
			cms.Items, cms.Continue = cms.Items[from:to], ""
			if to < all {
				cms.Continue = strconv.Itoa(to)
			}
			return nil
		},
	})
	r := NewReconciler(c2, c2, events.NewFakeRecorder(10), clocktesting.NewFakePassiveClock(t0))
	ctx := context.Background()
	deadline := func(tj *trainer.TrainJob) int64 {
		t.Helper()
		got, err := r.pinnedRuntime(ctx, tj)
		if err != nil {
			t.Fatalf("%s: %v", tj.Name, err)
		}
		return *got.RunPolicy.ActiveDeadlineSeconds
	}
	for _, tj := range []*trainer.TrainJob{a, b, c} {
		if got := deadline(tj); got != 60 {
			t.Fatalf("%s: deadline %d s after the restart, want the pinned 60 s", tj.Name, got)
		}
	}
	if lists != 1 || pages != 2 || gets != 0 {
		t.Fatalf("%d lists in %d pages and %d reads of a ConfigMap for three pinned jobs, want 1 list of 2 pages and no read", lists, pages, gets)
	}
	// Jobs not pinned before: pinned now, to the runtime as it is, without listing again.
	for _, tj := range []*trainer.TrainJob{d, fresh} {
		if got := deadline(tj); got != 600 {
			t.Fatalf("%s: deadline %d s, want the runtime's 600 s", tj.Name, got)
		}
	}
	if lists != 1 {
		t.Fatalf("listed the snapshots %d times", lists)
	}
	// A job of the same name, a new one: not the old one's snapshot.
	again := job("a")
	again.UID = "u-a-again"
	if _, err := r.pinnedRuntime(ctx, again); !errors.Is(err, errForeignSnapshot) {
		t.Fatalf("a new job under the old one's name: err = %v, want the snapshot conflict", err)
	}
}

// Jobs stamped with their runtime's hash at admission share one snapshot, stored once and
// owned by nobody; after a restart a stamped job gets the snapshot of its stamp though the
// runtime changed since; a job whose runtime changed between its admission and its first
// reconcile is pinned to a snapshot of its own; a ConfigMap in the way is reported; and the
// sweep deletes the shared snapshots no job names, and nothing else.
func TestSharedRuntimeSnapshots(t *testing.T) {
	scheme := snapshotScheme(t)
	spec := func(deadline int64) trainer.TrainingRuntimeSpec {
		return trainer.TrainingRuntimeSpec{RunPolicy: &trainer.RunPolicy{ActiveDeadlineSeconds: ptr.To(deadline)}}
	}
	hashOf := func(deadline int64) string {
		_, hash, err := trainer.EncodeRuntimeSnapshot(&trainer.RuntimeSnapshot{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch", Spec: spec(deadline)})
		if err != nil {
			t.Fatal(err)
		}
		return hash
	}
	job := func(name, stamp string) *trainer.TrainJob {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name)},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch"}}}
		if stamp != "" {
			tj.Annotations = map[string]string{trainer.AnnotationRuntimeSnapshot: stamp}
		}
		return tj
	}
	rt := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}, Spec: spec(60)}
	h60 := hashOf(60)
	a, b := job("a", h60), job("b", h60)
	var creates int
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(rt, a, b).Build(), interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				creates++
			}
			return cl.Create(ctx, obj, opts...)
		},
	})
	ctx := context.Background()
	deadline := func(r *Reconciler, tj *trainer.TrainJob) int64 {
		t.Helper()
		got, err := r.pinnedRuntime(ctx, tj)
		if err != nil {
			t.Fatalf("%s: %v", tj.Name, err)
		}
		return *got.RunPolicy.ActiveDeadlineSeconds
	}
	snapshots := func() []string {
		t.Helper()
		list := &corev1.ConfigMapList{}
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name+"="+cm.Labels[trainer.LabelRuntimeSnapshot])
		}
		return names
	}
	r := NewReconciler(c, c, events.NewFakeRecorder(10), clocktesting.NewFakePassiveClock(t0))
	if deadline(r, a) != 60 || deadline(r, b) != 60 {
		t.Fatal("the stamped jobs are not pinned to their runtime")
	}
	shared := trainer.SharedRuntimeSnapshotName(h60)
	if got := snapshots(); creates != 1 || !slices.Equal(got, []string{shared + "=" + trainer.SharedSnapshot}) {
		t.Fatalf("%d ConfigMap creates, snapshots %v; want one create of %s", creates, got, shared)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: shared}, cm); err != nil || len(cm.OwnerReferences) != 0 {
		t.Fatalf("the shared snapshot: %v, owners %v; want it owned by nobody", err, cm.OwnerReferences)
	}

	// The runtime is edited; c was admitted before the edit, d after it but its first
	// reconcile finds the runtime edited again (its stamp matches no runtime now).
	rt.Spec = spec(600)
	if err := c.Update(ctx, rt); err != nil {
		t.Fatal(err)
	}
	cj, dj := job("c", h60), job("d", hashOf(300))
	for _, tj := range []*trainer.TrainJob{cj, dj} {
		if err := c.Create(ctx, tj); err != nil {
			t.Fatal(err)
		}
	}
	restarted := NewReconciler(c, c, events.NewFakeRecorder(10), clocktesting.NewFakePassiveClock(t0))
	if got := deadline(restarted, cj); got != 60 {
		t.Fatalf("after a restart, a job stamped before the edit renders with a deadline of %d s, want its stamp's 60 s", got)
	}
	if got := deadline(restarted, dj); got != 600 {
		t.Fatalf("a job whose runtime changed since its admission: deadline %d s, want the runtime's 600 s", got)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: snapshotName(dj)}, cm); err != nil || !metav1.IsControlledBy(cm, dj) {
		t.Fatalf("the job pinned at its first reconcile: %v; want a snapshot of its own, owned by it", err)
	}

	// Someone else's ConfigMap under a shared snapshot's name.
	h600 := hashOf(600)
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: trainer.SharedRuntimeSnapshotName(h600),
		Labels: map[string]string{trainer.LabelRuntimeSnapshot: trainer.SharedSnapshot}}, Data: map[string]string{trainer.RuntimeSnapshotKey: "kind: x\n"}}); err != nil {
		t.Fatal(err)
	}
	ej := job("e", h600)
	if err := c.Create(ctx, ej); err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.pinnedRuntime(ctx, ej); !errors.Is(err, errForeignSnapshot) {
		t.Fatalf("a ConfigMap in the way of a shared snapshot: err = %v, want the snapshot conflict", err)
	}

	// The sweep: h60 is still named by c, then by nobody.
	for _, tj := range []*trainer.TrainJob{a, b} {
		if err := c.Delete(ctx, tj); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := restarted.sweepSnapshots(ctx); err != nil || n != 0 {
		t.Fatalf("sweep while c names the snapshot: %d deleted, %v; want none", n, err)
	}
	if err := c.Delete(ctx, cj); err != nil {
		t.Fatal(err)
	}
	if n, err := restarted.sweepSnapshots(ctx); err != nil || n != 1 {
		t.Fatalf("sweep once nobody names it: %d deleted, %v; want 1", n, err)
	}
	want := []string{snapshotName(dj) + "=" + trainer.OwnSnapshot, trainer.SharedRuntimeSnapshotName(h600) + "=" + trainer.SharedSnapshot}
	if got := snapshots(); !slices.Equal(got, want) {
		t.Fatalf("after the sweep: %v, want %v (the foreign ConfigMap and the job's own snapshot left alone)", got, want)
	}
	// Forgotten with it: a job stamped h60 now (the runtime edited back) stores it again.
	rt.Spec = spec(60)
	if err := c.Update(ctx, rt); err != nil {
		t.Fatal(err)
	}
	fj := job("f", h60)
	if err := c.Create(ctx, fj); err != nil {
		t.Fatal(err)
	}
	if got := deadline(restarted, fj); got != 60 {
		t.Fatalf("a job stamped with a swept hash: deadline %d, want 60", got)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: shared}, cm); err != nil {
		t.Fatalf("the swept snapshot is not stored again for a new job: %v", err)
	}
}

// When the jobs pinned to a shared snapshot are deleted, the collector looks at that snapshot
// (not all of them) and deletes it once the last of them is gone.
func TestSharedSnapshotOfDeletedJobs(t *testing.T) {
	scheme := snapshotScheme(t)
	spec, _, hash := torchSnapshot(t)
	job := func(name string) *trainer.TrainJob { return stampedJob("ns", name, hash) }
	a, b := job("a"), job("b")
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}, Spec: spec}, a, b).Build()
	r := NewReconciler(c, c, events.NewFakeRecorder(10), clocktesting.NewFakePassiveClock(t0))
	ctx := context.Background()
	for _, tj := range []*trainer.TrainJob{a, b} {
		if _, err := r.pinnedRuntime(ctx, tj); err != nil {
			t.Fatal(err)
		}
	}
	shared := client.ObjectKey{Namespace: "ns", Name: trainer.SharedRuntimeSnapshotName(hash)}
	deleteJob := func(tj *trainer.TrainJob) {
		t.Helper()
		if err := c.Delete(ctx, tj); err != nil {
			t.Fatal(err)
		}
		r.forget(client.ObjectKeyFromObject(tj))
		select {
		case <-r.snapshots.check:
		default:
			t.Fatal("the collector was not told of the deleted job's snapshot")
		}
	}
	deleteJob(a)
	if n, err := r.collectUnpinned(ctx); err != nil || n != 0 {
		t.Fatalf("b still names the snapshot: %d deleted, %v", n, err)
	}
	if err := c.Get(ctx, shared, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the snapshot b names: %v", err)
	}
	deleteJob(b)
	if n, err := r.collectUnpinned(ctx); err != nil || n != 1 {
		t.Fatalf("the last job gone: %d deleted, %v; want 1", n, err)
	}
	if err := c.Get(ctx, shared, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the snapshot after its last job: %v, want it deleted", err)
	}
	if n, err := r.collectUnpinned(ctx); err != nil || n != 0 {
		t.Fatalf("nothing left to look at: %d deleted, %v", n, err)
	}
}

// A shared snapshot being stored holds up only the jobs of that snapshot: a job of another
// namespace is pinned and the collector deletes another unreferenced snapshot meanwhile, the
// job of the same snapshot waits and then shares the stored one, and no lock is left behind.
func TestSharedSnapshotLocksArePerSnapshot(t *testing.T) {
	scheme := snapshotScheme(t)
	spec, data, hash := torchSnapshot(t)
	slow1, slow2, other := stampedJob("slow", "a", hash), stampedJob("slow", "b", hash), stampedJob("other", "a", hash)
	unreferenced := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "idle", Name: trainer.SharedRuntimeSnapshotName(hash),
		Labels: map[string]string{trainer.LabelRuntimeSnapshot: trainer.SharedSnapshot}}, Data: map[string]string{trainer.RuntimeSnapshotKey: data}}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	creates := map[string]int{}
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}, Spec: spec}, slow1, slow2, other, unreferenced).Build(), interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				mu.Lock()
				creates[obj.GetNamespace()]++
				mu.Unlock()
				if obj.GetNamespace() == "slow" {
					once.Do(func() { close(started) })
					<-release
				}
			}
			return cl.Create(ctx, obj, opts...)
		},
	})
	r := NewReconciler(c, c, events.NewFakeRecorder(10), clocktesting.NewFakePassiveClock(t0))
	ctx := context.Background()
	var released sync.Once
	t.Cleanup(func() { released.Do(func() { close(release) }) })

	pin := func(tj *trainer.TrainJob) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := r.pinnedRuntime(ctx, tj)
			done <- err
		}()
		return done
	}
	// within fails the test if done does not come: a lock held for another snapshot.
	within := func(what string, done <-chan error) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s waited for the snapshot being stored in another namespace", what)
		}
	}

	slowDone := pin(slow1)
	<-started
	// The second job of that snapshot waits for its lock.
	waits := make(chan sharedSnapshot, 1)
	r.snapshots.sharedLocks.waits = func(key sharedSnapshot) { waits <- key }
	waiting := pin(slow2)
	select {
	case key := <-waits:
		if key != (sharedSnapshot{"slow", hash}) {
			t.Fatalf("the second job waits for the lock of %v, want that of its snapshot", key)
		}
	case <-time.After(time.Minute):
		t.Fatal("the second job of the snapshot being stored does not wait for its lock")
	}
	within("pinning a job of another namespace", pin(other))
	collected := make(chan error, 1)
	go func() {
		gone, err := r.deleteUnreferenced(ctx, unreferenced, hash)
		if err == nil && !gone {
			err = errors.New("the unreferenced snapshot was not deleted")
		}
		collected <- err
	}()
	within("collecting an unreferenced snapshot of another namespace", collected)
	select {
	case err := <-waiting:
		t.Fatalf("a job of the snapshot being stored was pinned before it was stored (err %v)", err)
	default:
	}

	released.Do(func() { close(release) })
	within("the job storing the snapshot", slowDone)
	within("the job waiting for it", waiting)
	if creates["slow"] != 1 || creates["other"] != 1 {
		t.Fatalf("snapshot creates by namespace %v; want one in slow (its second job shares it) and one in other", creates)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(unreferenced), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the unreferenced snapshot: %v, want it deleted", err)
	}
	if n := r.snapshots.sharedLocks.held(); n != 0 {
		t.Fatalf("%d snapshot locks left once nothing is pinned or collected, want none", n)
	}
}

// torchSnapshot is the spec of a ClusterTrainingRuntime "torch" with a deadline of 60 s, and
// its snapshot's data and hash.
func torchSnapshot(t *testing.T) (spec trainer.TrainingRuntimeSpec, data, hash string) {
	t.Helper()
	spec = trainer.TrainingRuntimeSpec{RunPolicy: &trainer.RunPolicy{ActiveDeadlineSeconds: ptr.To[int64](60)}}
	data, hash, err := trainer.EncodeRuntimeSnapshot(&trainer.RuntimeSnapshot{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	return spec, data, hash
}

// stampedJob is a TrainJob of runtime "torch" stamped, as the defaulter does, with the hash of
// its runtime's snapshot.
func stampedJob(namespace, name, hash string) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("u-" + namespace + "-" + name),
		Annotations: map[string]string{trainer.AnnotationRuntimeSnapshot: hash}}, Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch"}}}
}

// snapshotScheme knows ConfigMaps and Kiln's trainer kinds.
func snapshotScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}
