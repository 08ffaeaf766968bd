package kube

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Recent gives lists read-your-writes on one server: it holds the objects this server
// created until its cache has seen them (the informer's add event, normally milliseconds
// later), and a list from the cache adds those it is missing. Without it a client that
// creates a job and lists at once may not find it. Nothing waits: a create is answered as
// soon as Kubernetes answers.
//
// It holds too the versions of objects that this server read from Kubernetes before its
// cache had them (the events of a watch, which streams from Kubernetes as the caller),
// until the cache reaches that version: a client that watched a job complete and then
// lists or gets it sees it complete, not the cache's older copy. And the deletions a watch
// delivered (tombstones), until the cache deletes the object too: a client that watched a
// job go (a TTL's deletion) and then gets it is told it is not found, not shown the cache's
// copy.
//
// Across replicas of the server a list is as fresh as that replica's cache.
type Recent struct {
	mu sync.Mutex
	m  map[recentKey]recentEntry
	// pruned is when entries older than recentTTL were last dropped.
	pruned time.Time
	clock  clock.PassiveClock
}

type recentKey struct {
	kind            reflect.Type
	namespace, name string
}

type recentEntry struct {
	obj client.Object
	at  time.Time
	// gone says obj was deleted (a watch's event) and the cache may not know yet.
	gone bool
}

// tombstoneOf says whether e is the deletion of obj (the same object, by UID).
func (e recentEntry) tombstoneOf(obj client.Object) bool {
	return e.gone && e.obj.GetUID() == obj.GetUID()
}

// recentTTL bounds how long an entry waits for its cache: an object created and deleted
// before the cache saw it gets no add event.
const recentTTL = 30 * time.Second

// NewRecent returns an empty Recent.
func NewRecent(c clock.PassiveClock) *Recent {
	return &Recent{m: map[recentKey]recentEntry{}, clock: c}
}

func keyOf(obj client.Object) recentKey {
	return recentKey{kind: reflect.TypeOf(obj).Elem(), namespace: obj.GetNamespace(), name: obj.GetName()}
}

// Created records obj, just created by this server (a pointer to a typed object).
func (r *Recent) Created(obj client.Object) {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[keyOf(obj)] = recentEntry{obj: obj.DeepCopyObject().(client.Object), at: now}
	r.prune(now)
}

// Observed records obj, a version this server read from Kubernetes (a watch event), unless
// a newer version of it is recorded already. The cache's update to that version (or any
// later one) drops it.
func (r *Recent) Observed(obj client.Object) {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	k := keyOf(obj)
	if e, ok := r.m[k]; ok && e.obj.GetUID() == obj.GetUID() && (e.gone || !Newer(obj, e.obj)) {
		return
	}
	r.m[k] = recentEntry{obj: obj.DeepCopyObject().(client.Object), at: now}
	r.prune(now)
}

// Gone records the deletion of obj that a watch delivered: until the cache deletes it too,
// gets find it gone (IsGone) and lists leave it out. A deletion older than the entry of
// another object of the name (created since) changes nothing.
func (r *Recent) Gone(obj client.Object) {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	k := keyOf(obj)
	if e, ok := r.m[k]; ok && e.obj.GetUID() != obj.GetUID() && olderThan(obj, e.obj) {
		return
	}
	r.m[k] = recentEntry{obj: obj.DeepCopyObject().(client.Object), at: now, gone: true}
	r.prune(now)
}

// olderThan says whether a's version is older than b's (of any object: resourceVersions
// order every write of the apiserver); false when they do not compare.
func olderThan(a, b client.Object) bool {
	c, err := resourceversion.CompareResourceVersion(a.GetResourceVersion(), b.GetResourceVersion())
	return err == nil && c < 0
}

// prune drops the entries older than recentTTL, at most once a second.
func (r *Recent) prune(now time.Time) {
	if now.Sub(r.pruned) < time.Second {
		return
	}
	r.pruned = now
	for k, e := range r.m {
		if now.Sub(e.at) > recentTTL {
			delete(r.m, k)
		}
	}
}

// Newer says whether a is a later version of the same object than b (by resourceVersion;
// false when they do not compare).
func Newer(a, b client.Object) bool {
	c, err := resourceversion.CompareResourceVersion(a.GetResourceVersion(), b.GetResourceVersion())
	return err == nil && c > 0 && a.GetUID() == b.GetUID()
}

// Latest is a copy of the version of obj this server read that is newer than obj (the
// cache's copy), if it has one.
func Latest[T any, PT interface {
	*T
	client.Object
}](r *Recent, obj PT) (PT, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[keyOf(obj)]
	if !ok || e.gone || !Newer(e.obj, obj) {
		return nil, false
	}
	latest, ok := e.obj.DeepCopyObject().(PT)
	return latest, ok
}

// IsGone says whether a watch of this server delivered the deletion of obj (the cache's
// copy, which it may still hold).
func (r *Recent) IsGone(obj client.Object) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[keyOf(obj)]
	return ok && e.tombstoneOf(obj)
}

// Forget drops obj's entry (deleted by this server).
func (r *Recent) Forget(obj client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, keyOf(obj))
}

// seen drops the entry of obj's name once the cache adds an object of that name: the one
// this server created, or one created after it; not the tombstone of the object added (the
// cache is behind the watch that saw it deleted).
func (r *Recent) seen(obj any) {
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[keyOf(o)]; ok && !e.tombstoneOf(o) {
		delete(r.m, keyOf(o))
	}
}

// caughtUp drops the entry of obj's name once the cache holds that object at the entry's
// version or a later one (or a version that does not compare with it).
func (r *Recent) caughtUp(obj any) {
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[keyOf(o)]; ok && !e.gone && e.obj.GetUID() == o.GetUID() && !Newer(e.obj, o) {
		delete(r.m, keyOf(o))
	}
}

// Deleted drops the entry of obj, deleted from the cache (the informer's deletion or its
// tombstone), unless it is of another object of that name (created after it).
func (r *Recent) Deleted(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[keyOf(o)]; ok && e.obj.GetUID() == o.GetUID() {
		delete(r.m, keyOf(o))
	}
}

// watch makes informer's events drop the entries the cache caught up with: the objects it
// adds, the versions it updates to, the objects it deletes.
func (r *Recent) watch(informer cache.Informer) error {
	_, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.seen(obj) },
		UpdateFunc: func(_, obj any) { r.caughtUp(obj) },
		DeleteFunc: r.Deleted,
	})
	return err
}

// pending returns the entries of kind T in namespace ("" for all) matching selector, and
// the UIDs of those a watch saw deleted (tombstones: nil when there are none), for lists to
// leave out.
func pending[T any, PT interface {
	*T
	client.Object
}](r *Recent, namespace string, selector labels.Selector) ([]T, map[types.UID]bool) {
	kind := reflect.TypeFor[T]()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	var gone map[types.UID]bool
	for k, e := range r.m {
		if k.kind != kind || (namespace != "" && k.namespace != namespace) {
			continue
		}
		if e.gone {
			if gone == nil {
				gone = map[types.UID]bool{}
			}
			gone[e.obj.GetUID()] = true
			continue
		}
		if selector != nil && !selector.Matches(labels.Set(e.obj.GetLabels())) {
			continue
		}
		out = append(out, *any(e.obj).(PT))
	}
	return out, gone
}

// SortedWithRecent sorts items (the objects of kind T in the cache, in namespace, "" for
// all, matching selector: CachedList's) by namespace and name, and adds this server's
// creates the cache does not hold yet. Where the cache still holds an older object of the
// same name (deleted before this create), or an older version of the one this server read,
// the recorded one replaces it.
func SortedWithRecent[T any, PT interface {
	*T
	client.Object
}](r *Recent, items []PT, namespace string, selector labels.Selector) []PT {
	byName := func(a, b PT) int { return CompareNames(a, b.GetNamespace(), b.GetName()) }
	recent, gone := pending[T, PT](r, namespace, selector)
	if gone != nil {
		items = slices.DeleteFunc(items, func(obj PT) bool { return gone[obj.GetUID()] })
	}
	slices.SortFunc(items, byName)
	for i := range recent {
		obj := PT(&recent[i])
		j, found := slices.BinarySearchFunc(items, obj, byName)
		switch {
		case !found:
			items = slices.Insert(items, j, obj)
		case items[j].GetUID() != obj.GetUID(), Newer(obj, items[j]):
			items[j] = obj
		}
	}
	return items
}

// CompareNames orders obj against namespace/name: by namespace, then name.
func CompareNames(obj client.Object, namespace, name string) int {
	return cmp.Or(strings.Compare(obj.GetNamespace(), namespace), strings.Compare(obj.GetName(), name))
}

// CachedList returns the objects of kind T in c, in namespace ("" for all), that match
// selector (nil for all): the cache's own objects, which callers only read. It reads the
// informer's index: a cache List copies every object of the namespace into the list, which
// with tens of thousands of jobs was most of a list call's time.
func CachedList[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, c cache.Cache, namespace string, selector labels.Selector) ([]PT, error) {
	informer, err := c.GetInformer(ctx, PT(new(T)))
	if err != nil {
		return nil, err
	}
	indexed, ok := informer.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("listing %T: %w", PT(new(T)), errNoIndex)
	}
	var objs []any
	if namespace == "" {
		objs = indexed.GetStore().List()
	} else if objs, err = indexed.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
		return nil, err
	}
	out := make([]PT, 0, len(objs))
	for _, o := range objs {
		obj, ok := o.(PT)
		if !ok {
			continue
		}
		if selector != nil && !selector.Empty() && !selector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		out = append(out, obj)
	}
	return out, nil
}
