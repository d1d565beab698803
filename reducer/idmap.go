package reducer

import "iter"

// smallIDs is the entry count up to which an idMap is a slice of entries
// searched linearly (or up to its reserved capacity); past it, a map. A short thread's run has a handful of
// ids per kind, so most threads never build the map: no hashing, no map
// header and bucket group per kind, and a few string compares per lookup.
// The bound keeps a lookup O(1) however many items a run accumulates.
const smallIDs = 8

// firstIDs is the capacity of an idMap's first slice. Most of a run's maps
// end it with one or two ids (open items, activities, reasoning, subagents
// closed, calls answered in bench/'s short threads); the one that holds
// more, ownText, reserves smallIDs when its Thread is made.
const firstIDs = 2

// idMap maps item ids to values (owners, or struct{} as a set) for the
// run-scoped bookkeeping of machine. The zero idMap is empty and ready.
// Iteration order is unspecified, as for a map; callers that expose the
// keys sort them.
type idMap[V any] struct {
	small []idEntry[V]
	big   map[string]V // non-nil once more than smallIDs entries; small is then unused
}

type idEntry[V any] struct {
	k string
	v V
}

// sameID is a == b, with a look at the last byte before the full compare:
// the ids of one kind are mostly of one length and differ at the end
// ("msg-1", "msg-2"), where == calls memequal on each entry a linear
// search passes.
func sameID(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || a[len(a)-1] == b[len(b)-1]) && a == b
}

// idSet is an idMap used as a set.
type idSet = idMap[struct{}]

// get returns the value for k and whether k is present.
func (s *idMap[V]) get(k string) (V, bool) {
	if s.big != nil {
		v, ok := s.big[k]
		return v, ok
	}
	for i := len(s.small) - 1; i >= 0; i-- { // the last few items a run began are named most
		if sameID(s.small[i].k, k) {
			return s.small[i].v, true
		}
	}
	var zero V
	return zero, false
}

// at returns the value for k, or the zero V when k is absent.
func (s *idMap[V]) at(k string) V {
	v, _ := s.get(k)
	return v
}

// has reports whether k is present.
func (s *idMap[V]) has(k string) bool {
	_, ok := s.get(k)
	return ok
}

// put sets the value for k. k is stored: it must be a retained string.
func (s *idMap[V]) put(k string, v V) {
	if s.big != nil {
		s.big[k] = v
		return
	}
	for i := range s.small {
		if sameID(s.small[i].k, k) {
			s.small[i].v = v
			return
		}
	}
	switch n := len(s.small); {
	case n == 0 && cap(s.small) == 0:
		s.small = make([]idEntry[V], 0, firstIDs)
	case n >= smallIDs && n == cap(s.small):
		s.big = make(map[string]V, 2*n)
		for _, e := range s.small {
			s.big[e.k] = e.v
		}
		s.big[k] = v
		s.small = nil
		return
	}
	s.small = append(s.small, idEntry[V]{k, v})
}

// reserve makes room for n entries searched linearly, n >= smallIDs, in an
// empty idMap: a map whose first entries are many and short-lived keeps its
// linear search longer than smallIDs. It must be called before the first
// put.
func (s *idMap[V]) reserve(n int) {
	s.small = make([]idEntry[V], 0, n)
}

// del removes k, if present.
func (s *idMap[V]) del(k string) {
	if s.big != nil {
		delete(s.big, k)
		return
	}
	for i := range s.small {
		if sameID(s.small[i].k, k) {
			last := len(s.small) - 1
			s.small[i] = s.small[last]
			s.small[last] = idEntry[V]{} // drop the references
			s.small = s.small[:last]
			return
		}
	}
}

// len returns the number of entries.
func (s *idMap[V]) len() int {
	if s.big != nil {
		return len(s.big)
	}
	return len(s.small)
}

// clear removes every entry, keeping the storage for the next run.
func (s *idMap[V]) clear() {
	if s.big != nil {
		clear(s.big)
		return
	}
	clear(s.small)
	s.small = s.small[:0]
}

// all yields every entry, in unspecified order.
func (s *idMap[V]) all() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		if s.big != nil {
			for k, v := range s.big {
				if !yield(k, v) {
					return
				}
			}
			return
		}
		for _, e := range s.small {
			if !yield(e.k, e.v) {
				return
			}
		}
	}
}
