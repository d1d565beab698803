package fanout

import (
	"math"
	"sync"
)

// Lingering feeds are bounded because a subscriber names any thread id it
// likes: a tenant cycling connections over many ids (real or not) would
// otherwise leave a NATS subscription and a ring behind for each, for a
// whole Linger, and crowd out everyone else on the node.
//
// Policy: when a feed starts to linger and its tenant already has
// MaxIdleFeedsPerTenant lingering feeds, the tenant's oldest lingering feed
// ends; otherwise, when the hub has MaxIdleFeeds, the oldest lingering feed
// of any tenant ends. Oldest first, because a client resumes within
// seconds of leaving if at all: the newest idle feed is the one most
// likely to be resumed from, the oldest the closest to Sweep anyway.
// (Ending the newcomer instead would need no lists, but then whichever
// feeds came first hold the slots for a whole Linger, and a tenant's
// clients that just left, the likeliest to resume, get none.) A tenant can
// only push out its own feeds until the overall bound is reached, which
// takes MaxIdleFeeds/MaxIdleFeedsPerTenant tenants at their bound (10 by
// default); past that it is oldest first across tenants, not
// largest-tenant first.

// Bounds used as label values of Metrics.IdleEnded.
const (
	BoundTenant = "tenant" // MaxIdleFeedsPerTenant
	BoundTotal  = "total"  // MaxIdleFeeds
)

// idleBound normalises a configured bound: zero is the default, negative
// is none.
func idleBound(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return math.MaxInt
	}
	return n
}

// idleSet holds the hub's lingering feeds (refs == 0, still in their
// shard's map) in two intrusive lists, oldest first: all of them, and
// those of each tenant. Invariant (under mu): a feed is linked in both
// lists or in neither; all.n is the sum of the tenants' n; a tenant with
// no lingering feed has no entry. A feed leaves the lists when it is
// re-acquired, swept, closed, or pushed out by add (then ended by
// hub.endIdle).
type idleSet struct {
	mu        sync.Mutex
	all       idleList
	tenants   map[string]*idleList
	perTenant int
	total     int
	m         *Metrics
}

// idleLinks are a feed's places in the lists: the zero value when it is in
// neither.
type idleLinks struct {
	in          bool
	all, tenant idleLink
}

// idleLink is a feed's place in one list.
type idleLink struct{ prev, next *feed }

type idleList struct {
	head, tail *feed // oldest, newest
	n          int
	tenant     bool // the list of one tenant (links idleLinks.tenant), else of all
}

// link returns f's place in l.
func (l *idleList) link(f *feed) *idleLink {
	if l.tenant {
		return &f.idle.tenant
	}
	return &f.idle.all
}

// push links f as the newest of l.
func (l *idleList) push(f *feed) {
	l.link(f).prev = l.tail
	if l.tail != nil {
		l.link(l.tail).next = f
	} else {
		l.head = f
	}
	l.tail = f
	l.n++
}

// remove unlinks f from l.
func (l *idleList) remove(f *feed) {
	lf := l.link(f)
	if lf.prev != nil {
		l.link(lf.prev).next = lf.next
	} else {
		l.head = lf.next
	}
	if lf.next != nil {
		l.link(lf.next).prev = lf.prev
	} else {
		l.tail = lf.prev
	}
	l.n--
}

func (s *idleSet) init(perTenant, total int, m *Metrics) {
	s.tenants = make(map[string]*idleList)
	s.perTenant, s.total, s.m = perTenant, total, m
}

// add links f as the newest lingering feed. If that overflows a bound, it
// unlinks the oldest feed the bound applies to and returns it with the
// bound's name: the caller ends it (hub.endIdle) after releasing its
// locks. Since add links one feed and unlinks at most one, the lists never
// exceed the bounds. Called with f's shard lock held.
func (s *idleSet) add(f *feed) (victim *feed, bound string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.idle.in {
		panic("fanout: BUG: a lingering feed was released again")
	}
	tl := s.tenants[f.key.tenant]
	if tl == nil {
		tl = &idleList{tenant: true}
		s.tenants[f.key.tenant] = tl
	}
	f.idle.in = true
	s.all.push(f)
	tl.push(f)
	switch {
	case tl.n > s.perTenant:
		victim, bound = tl.head, BoundTenant
	case s.all.n > s.total:
		victim, bound = s.all.head, BoundTotal
	default:
		s.m.IdleFeeds.Set(float64(s.all.n))
		return nil, ""
	}
	s.removeLocked(victim)
	return victim, bound
}

// remove unlinks f if it is linked. Called with f's shard lock held.
func (s *idleSet) remove(f *feed) {
	s.mu.Lock()
	s.removeLocked(f)
	s.mu.Unlock()
}

func (s *idleSet) removeLocked(f *feed) {
	if !f.idle.in {
		return
	}
	tl := s.tenants[f.key.tenant]
	s.all.remove(f)
	tl.remove(f)
	if tl.n == 0 {
		delete(s.tenants, f.key.tenant)
	}
	f.idle = idleLinks{}
	s.m.IdleFeeds.Set(float64(s.all.n))
}

// linked reports whether f is in the lists. Called with f's shard lock held.
func (s *idleSet) linked(f *feed) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f.idle.in
}
