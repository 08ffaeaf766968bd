package kube

import (
	"cmp"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names keeps the names of a cached kind's objects sorted by namespace, then name, so that
// a page of a list is found by binary search and its objects read by key: sorting every
// object of the namespace on every call was most of a list's time with tens of thousands of
// jobs. Adds and deletes mark the order stale (an update keeps an object's name); the next
// list sorts the names again, once, for every caller.
type Names struct {
	store toolscache.Store
	stale atomic.Bool

	mu     sync.Mutex
	built  bool
	sorted []objectName
}

var errNoIndex = errors.New("the cache's informer keeps no index")

type objectName struct{ namespace, name string }

func (n objectName) key() string {
	if n.namespace == "" {
		return n.name
	}
	return n.namespace + "/" + n.name
}

func compareName(a, b objectName) int {
	return cmp.Or(strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name))
}

// NewNames keeps the names of store's objects (keyed namespace/name, as informers key them).
// Its owner calls Changed on every add and delete.
func NewNames(store toolscache.Store) *Names {
	return &Names{store: store}
}

// Changed marks the order stale.
func (n *Names) Changed() { n.stale.Store(true) }

// watchNames keeps the names of informer's objects.
func watchNames(informer cache.Informer) (*Names, error) {
	indexed, ok := informer.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, errNoIndex
	}
	n := NewNames(indexed.GetStore())
	changed := func(any) { n.Changed() }
	_, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: changed, DeleteFunc: changed})
	return n, err
}

// names returns the sorted names; the slice is never changed once returned.
func (n *Names) names() []objectName {
	n.mu.Lock()
	defer n.mu.Unlock()
	// Cleared before the store is read: a change while it is read marks it stale again.
	if n.stale.Swap(false) || !n.built {
		keys := n.store.ListKeys()
		sorted := make([]objectName, 0, len(keys))
		for _, k := range keys {
			ns, name, ok := strings.Cut(k, "/")
			if !ok {
				ns, name = "", k
			}
			sorted = append(sorted, objectName{ns, name})
		}
		slices.SortFunc(sorted, compareName)
		n.sorted, n.built = sorted, true
	}
	return n.sorted
}

// SortedAfter yields the objects of kind T in namespace ("" for all) that match selector
// (nil for all), ordered by namespace and name, from the one after after ("namespace/name";
// "" for the first): the cache's (which callers only read), with this server's creates the
// cache does not hold yet (Recent), as SortedWithRecent orders them.
func SortedAfter[T any, PT interface {
	*T
	client.Object
}](r *Recent, n *Names, namespace string, selector labels.Selector, after string) iter.Seq[PT] {
	return func(yield func(PT) bool) {
		var from objectName
		if after != "" {
			from.namespace, from.name, _ = strings.Cut(after, "/")
		}
		isAfter := func(o objectName) bool { return after == "" || compareName(o, from) > 0 }
		names := n.names()
		lo, hi := 0, len(names)
		if namespace != "" {
			lo, _ = slices.BinarySearchFunc(names, namespace, func(o objectName, ns string) int { return cmp.Compare(o.namespace, ns) })
			hi = lo + firstWhere(names[lo:], func(o objectName) bool { return o.namespace > namespace })
		}
		i := lo
		if after != "" {
			i = max(lo, firstWhere(names[:hi], func(o objectName) bool { return compareName(o, from) > 0 }))
		}
		var recent []PT
		pend, gone := pending[T, PT](r, namespace, selector)
		for k := range pend {
			if obj := PT(&pend[k]); isAfter(objectName{obj.GetNamespace(), obj.GetName()}) {
				recent = append(recent, obj)
			}
		}
		slices.SortFunc(recent, func(a, b PT) int { return CompareNames(a, b.GetNamespace(), b.GetName()) })
		cached := func(o objectName) PT {
			item, exists, err := n.store.GetByKey(o.key())
			if err != nil || !exists {
				return nil
			}
			obj, ok := item.(PT)
			if !ok || gone[obj.GetUID()] || selector != nil && !selector.Empty() && !selector.Matches(labels.Set(obj.GetLabels())) {
				return nil
			}
			return obj
		}
		for j := 0; i < hi || j < len(recent); {
			var next PT
			if j < len(recent) && (i >= hi || CompareNames(recent[j], names[i].namespace, names[i].name) <= 0) {
				next = recent[j]
				if i < hi && CompareNames(next, names[i].namespace, names[i].name) == 0 {
					// The cache holds one of the name: listed once, the cache's if it is this one
					// at the recorded version or later.
					if c := cached(names[i]); c != nil && c.GetUID() == next.GetUID() && !Newer(next, c) {
						next = c
					}
					i++
				}
				j++
			} else {
				next = cached(names[i])
				i++
			}
			if next != nil && !yield(next) {
				return
			}
		}
	}
}

// firstWhere is the index of the first of sorted for which above turns true.
func firstWhere(sorted []objectName, above func(objectName) bool) int {
	i, _ := slices.BinarySearchFunc(sorted, true, func(o objectName, _ bool) int {
		if above(o) {
			return 1
		}
		return -1
	})
	return i
}
