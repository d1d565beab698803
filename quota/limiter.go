package quota

// NOTE: a Limiter is numShards shards, a tenant's by FNV-1a of its name.
// Each shard has one mutex over its map of tenant states and the LRU list
// of those that hold nothing (most recent at head). Every call looks its
// tenant up (creating it, which may forget others: forget), does its
// arithmetic under the lock, and returns; no call blocks or takes a second
// lock.

import (
	"fmt"
	"math"
	"sync"
	"time"
)

const numShards = 16

// Limiter enforces a Config. Build it with New; safe for concurrent use.
type Limiter struct {
	cfg      Config
	perShard int
	shards   [numShards]limShard
}

type limShard struct {
	mu         sync.Mutex
	m          map[string]*tenantState
	head, tail *tenantState
	_          [64]byte // against false sharing of neighbouring shards' locks
}

// tenantState is what a Limiter keeps of one tenant. Invariant: it is in
// its shard's LRU list iff it is in the shard's map and holds nothing. A
// tenant holding something cannot be forgotten, so it is kept out of the
// list: forget, which looks at a few entries from the cold end only, would
// otherwise stop at holders (streams open for hours drift there) and never
// reach the tenants behind them.
type tenantState struct {
	name       string
	lim        Limits
	ev, by     bucket
	body       int64          // body bytes in flight
	streams    int64          // open streams
	taps       int64          // open tap streams
	threads    map[string]int // thread → streams subscribed to it
	last       time.Time      // last call about the tenant
	prev, next *tenantState
}

func (t *tenantState) holds() bool {
	return t.body > 0 || t.streams > 0 || t.taps > 0 || len(t.threads) > 0
}

// bucket is a token bucket: tokens at time at, refilled at rate up to cap.
type bucket struct {
	tokens float64
	at     time.Time
}

// full reports whether b holds cap at now (always, without a rate: the
// bucket is not used).
func (b *bucket) full(now time.Time, rate, cap float64) bool {
	return rate <= 0 || b.tokens+now.Sub(b.at).Seconds()*rate >= cap
}

func (b *bucket) refill(now time.Time, rate, cap float64) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(cap, b.tokens+d.Seconds()*rate)
		b.at = now
	}
}

// New returns a Limiter for cfg (validated).
func New(cfg Config) (*Limiter, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{cfg: cfg, perShard: max(1, (cfg.MaxTenants+numShards-1)/numShards)}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*tenantState)
	}
	return l, nil
}

// Config returns the limiter's configuration.
func (l *Limiter) Config() Config { return l.cfg }

// Limits returns tenant's limits.
func (l *Limiter) Limits(tenant string) Limits { return l.cfg.For(tenant) }

// shard is tenant's shard, by FNV-1a of its name (inlined: hash/fnv's
// Write would copy the string).
func (l *Limiter) shard(tenant string) *limShard {
	h := uint32(2166136261)
	for i := 0; i < len(tenant); i++ {
		h = (h ^ uint32(tenant[i])) * 16777619
	}
	return &l.shards[h%numShards]
}

// state returns tenant's state at the LRU head, creating it; nil when the
// shard is full of tenants that hold something. Called with s.mu held.
func (l *Limiter) state(s *limShard, tenant string, now time.Time) *tenantState {
	t := s.m[tenant]
	if t == nil {
		l.forget(s, now)
		if len(s.m) >= l.perShard {
			return nil
		}
		lim := l.cfg.For(tenant)
		t = &tenantState{name: tenant, lim: lim,
			ev: bucket{tokens: lim.eventsBurst(), at: now}, by: bucket{tokens: lim.bytesBurst(), at: now}}
		s.m[tenant] = t
		s.pushFront(t)
	} else if !t.holds() {
		s.unlink(t)
		s.pushFront(t)
	}
	t.last = now
	return t
}

// forget drops tenants from the cold end of the list (which holds only
// tenants holding nothing): those idle for IdleAfter whose buckets are full
// again, and, while the shard is full, the least recently used.
func (l *Limiter) forget(s *limShard, now time.Time) {
	for t, n := s.tail, 0; t != nil && n < 8; n++ {
		if len(s.m) < l.perShard && now.Sub(t.last) < l.cfg.IdleAfter {
			return // the rest is more recent still
		}
		prev := t.prev
		if len(s.m) >= l.perShard || t.refilled(now) {
			s.unlink(t)
			delete(s.m, t.name)
		}
		t = prev
	}
}

// refilled reports whether t's buckets are full at now: forgetting t then
// gives it nothing (a tenant seen anew starts with full buckets). A burst
// can take longer than IdleAfter to refill.
func (t *tenantState) refilled(now time.Time) bool {
	return t.ev.full(now, t.lim.EventsPerSec, t.lim.eventsBurst()) && t.by.full(now, t.lim.BytesPerSec, t.lim.bytesBurst())
}

// pushFront puts t, in no list, at the head of the list.
func (s *limShard) pushFront(t *tenantState) {
	t.prev, t.next = nil, s.head
	if s.head != nil {
		s.head.prev = t
	}
	s.head = t
	if s.tail == nil {
		s.tail = t
	}
}

// settle keeps t in the list iff it holds nothing, after a change of its
// holds; held is whether it held something before.
func (s *limShard) settle(t *tenantState, held bool) {
	switch holds := t.holds(); {
	case holds && !held:
		s.unlink(t)
	case !holds && held:
		s.pushFront(t)
	}
}

func (s *limShard) unlink(t *tenantState) {
	if t.prev != nil {
		t.prev.next = t.next
	} else if s.head == t {
		s.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else if s.tail == t {
		s.tail = t.prev
	}
	t.prev, t.next = nil, nil
}

func (l *Limiter) full(tenant string) error {
	return &ExceededError{Tenant: tenant, Kind: KindTenants, Limit: float64(l.cfg.MaxTenants), RetryAfter: holdRetry}
}

// Take spends events and bytes of tenant's rate quotas, both or neither:
// nil when both buckets hold enough (an amount over a burst passes on a
// full bucket), else an *ExceededError for the first one short (events
// first) and nothing is spent.
func (l *Limiter) Take(tenant string, events, bytes int64) error {
	s := l.shard(tenant)
	now := l.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := l.state(s, tenant, now)
	if t == nil {
		return l.full(tenant)
	}
	lim := &t.lim
	if lim.EventsPerSec > 0 {
		t.ev.refill(now, lim.EventsPerSec, lim.eventsBurst())
		if err := short(tenant, KindEvents, &t.ev, float64(events), lim.EventsPerSec, lim.eventsBurst()); err != nil {
			return err
		}
	}
	if lim.BytesPerSec > 0 {
		t.by.refill(now, lim.BytesPerSec, lim.bytesBurst())
		if err := short(tenant, KindBytes, &t.by, float64(bytes), lim.BytesPerSec, lim.bytesBurst()); err != nil {
			return err
		}
	}
	if lim.EventsPerSec > 0 {
		t.ev.tokens -= float64(events)
	}
	if lim.BytesPerSec > 0 {
		t.by.tokens -= float64(bytes)
	}
	return nil
}

// short returns the refusal when b cannot pay n now.
func short(tenant string, k Kind, b *bucket, n, rate, cap float64) error {
	need := math.Min(n, cap) // more than a burst is paid on a full bucket
	if b.tokens >= need {
		return nil
	}
	wait := time.Duration((need - b.tokens) / rate * float64(time.Second))
	return &ExceededError{Tenant: tenant, Kind: k, Limit: rate, Window: time.Second,
		Remaining: int64(math.Max(0, b.tokens)), RetryAfter: wait}
}

// AcquireBody takes n bytes of tenant's body-in-flight quota; give them
// back with ReleaseBody(tenant, n).
func (l *Limiter) AcquireBody(tenant string, n int64) error {
	return l.hold(tenant, KindBody, n, func(t *tenantState) *int64 { return &t.body }, func(lm *Limits) int64 { return lm.BodyBytesInFlight })
}

// ReleaseBody gives back n bytes taken by AcquireBody.
func (l *Limiter) ReleaseBody(tenant string, n int64) {
	l.release(tenant, func(t *tenantState) { t.body -= n })
}

// AcquireStream takes one of tenant's open streams; ReleaseStream gives it
// back.
func (l *Limiter) AcquireStream(tenant string) error {
	return l.hold(tenant, KindStreams, 1, func(t *tenantState) *int64 { return &t.streams }, func(lm *Limits) int64 { return lm.Streams })
}

// ReleaseStream gives back a stream taken by AcquireStream.
func (l *Limiter) ReleaseStream(tenant string) {
	l.release(tenant, func(t *tenantState) { t.streams-- })
}

// AcquireTap takes one of tenant's tap subscriptions; ReleaseTap gives it
// back.
func (l *Limiter) AcquireTap(tenant string) error {
	return l.hold(tenant, KindTaps, 1, func(t *tenantState) *int64 { return &t.taps }, func(lm *Limits) int64 { return lm.Taps })
}

// ReleaseTap gives back a tap taken by AcquireTap.
func (l *Limiter) ReleaseTap(tenant string) {
	l.release(tenant, func(t *tenantState) { t.taps-- })
}

func (l *Limiter) hold(tenant string, k Kind, n int64, field func(*tenantState) *int64, limit func(*Limits) int64) error {
	s := l.shard(tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := l.state(s, tenant, l.cfg.Now())
	if t == nil {
		return l.full(tenant)
	}
	v, lim := field(t), limit(&t.lim)
	if lim > 0 && *v+n > lim {
		return &ExceededError{Tenant: tenant, Kind: k, Limit: float64(lim), Remaining: lim - *v, RetryAfter: holdRetry}
	}
	held := t.holds()
	*v += n
	s.settle(t, held)
	return nil
}

func (l *Limiter) release(tenant string, f func(*tenantState)) {
	s := l.shard(tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.m[tenant]; t != nil { // a holding tenant is never forgotten
		held := t.holds()
		f(t)
		t.last = l.cfg.Now()
		if !t.holds() {
			if !held {
				s.unlink(t) // in the list already
			}
			s.pushFront(t) // the most recent
		}
	}
}

// AcquireThread records a stream of tenant subscribed to thread: a thread
// the tenant has no stream on yet takes one of its threads quota.
// ReleaseThread undoes it.
func (l *Limiter) AcquireThread(tenant, thread string) error {
	s := l.shard(tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := l.state(s, tenant, l.cfg.Now())
	if t == nil {
		return l.full(tenant)
	}
	if n, ok := t.threads[thread]; ok {
		t.threads[thread] = n + 1
		return nil
	}
	if lim := t.lim.Threads; lim > 0 && int64(len(t.threads)) >= lim {
		return &ExceededError{Tenant: tenant, Kind: KindThreads, Limit: float64(lim), RetryAfter: holdRetry}
	}
	if t.threads == nil {
		t.threads = make(map[string]int)
	}
	held := t.holds()
	t.threads[thread] = 1
	s.settle(t, held)
	return nil
}

// ReleaseThread undoes one AcquireThread.
func (l *Limiter) ReleaseThread(tenant, thread string) {
	l.release(tenant, func(t *tenantState) {
		if t.threads[thread]--; t.threads[thread] <= 0 {
			delete(t.threads, thread)
		}
	})
}

// Tenants returns the tenants the limiter keeps state for (in no order).
func (l *Limiter) Tenants() []string {
	var ts []string
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for name := range s.m {
			ts = append(ts, name)
		}
		s.mu.Unlock()
	}
	return ts
}

// Usage is a snapshot of one tenant's holds, for tests and diagnostics.
type Usage struct {
	Body, Streams, Taps, Threads int64
	Known                        bool
}

// Usage returns tenant's current holds.
func (l *Limiter) Usage(tenant string) Usage {
	s := l.shard(tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.m[tenant]
	if t == nil {
		return Usage{}
	}
	return Usage{Body: t.body, Streams: t.streams, Taps: t.taps, Threads: int64(len(t.threads)), Known: true}
}

func (l *Limiter) String() string {
	return fmt.Sprintf("quota.Limiter{default: %+v, overrides: %d}", l.cfg.Default, len(l.cfg.Tenants))
}
