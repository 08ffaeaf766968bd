package kube

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
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

// Forget drops obj's entry (deleted by this server).
func (r *Recent) Forget(obj client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, keyOf(obj))
}

// seen drops the entry of obj's name once the cache adds an object of that name: the one
// this server created, or one created after it.
func (r *Recent) seen(obj any) {
	if o, ok := obj.(client.Object); ok {
		r.Forget(o)
	}
}

// watch makes informer's add events drop the entries of the objects they add.
func (r *Recent) watch(informer cache.Informer) error {
	_, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { r.seen(obj) }})
	return err
}

// pending returns the entries of kind T in namespace ("" for all) matching selector.
func pending[T any, PT interface {
	*T
	client.Object
}](r *Recent, namespace string, selector labels.Selector) []T {
	kind := reflect.TypeFor[T]()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	for k, e := range r.m {
		if k.kind != kind || (namespace != "" && k.namespace != namespace) {
			continue
		}
		if selector != nil && !selector.Matches(labels.Set(e.obj.GetLabels())) {
			continue
		}
		out = append(out, *any(e.obj).(PT))
	}
	return out
}

// SortedWithRecent sorts items (a list of kind T from the cache, in namespace, "" for
// all, matching selector) by namespace and name, and adds this server's creates the cache
// does not hold yet. Where the cache still holds an older object of the same name (deleted
// before this create), the new one replaces it. It sorts pointers into items: sorting the
// objects themselves moved each one many times over, most of a list's time.
func SortedWithRecent[T any, PT interface {
	*T
	client.Object
}](r *Recent, items []T, namespace string, selector labels.Selector) []PT {
	byName := func(a, b PT) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	}
	recent := pending[T, PT](r, namespace, selector)
	out := make([]PT, len(items), len(items)+len(recent))
	for i := range items {
		out[i] = PT(&items[i])
	}
	slices.SortFunc(out, byName)
	for i := range recent {
		obj := PT(&recent[i])
		j, found := slices.BinarySearchFunc(out, obj, byName)
		switch {
		case !found:
			out = slices.Insert(out, j, obj)
		case out[j].GetUID() != obj.GetUID():
			out[j] = obj
		}
	}
	return out
}
