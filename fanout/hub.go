package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/wire"
)

// NOTE: structure of the hub.
//
//	hub ─ 64 hubShards (mutex + map feedKey → *feed), padded
//	        feed: one NATS subscription on view.<tenant>.<thread>,
//	              the ring of recent frames, the latest snapshot,
//	              the set of local Subscribers            (feed.mu)
//	                subscriber: bounded byte queue of shared []byte (subscriber.mu)
//
//	      idle: the lingering feeds (refs == 0), oldest first, overall and
//	            per tenant, bounded by MaxIdleFeeds(PerTenant) (idleSet.mu);
//	            their rings are kept within IdleRingBytes
//
// Lock order: hubShard.mu → idleSet.mu (a feed's refs and its place in the
// idle lists change together, under its shard lock); nothing takes a shard
// lock while holding idleSet.mu, so a feed pushed out of the idle lists is
// ended after both locks are released (endIdle). hubShard.mu is never held
// while taking feed.mu (acquire and release take only the shard lock; Sweep
// takes feed.mu after letting go of it, to trim lingering rings);
// feed.mu → subscriber.mu. Nothing takes feed.mu while holding a
// subscriber.mu.
//
// Seq bookkeeping of a feed (all under feed.mu): once known, the feed can
// serve every position p with lo ≤ p ≤ hi that is a frame boundary: lo (the
// prev of the oldest frame in the ring, or an adopted snapshot seq), a seq of
// a frame in the ring, or hi (the newest seq). The ring is contiguous: each
// frame's prev is the previous frame's seq. Because the NATS subscription
// was in place before any snapshot was requested, every frame after hi is
// still to arrive, in order; a frame whose prev ≠ hi means the feed itself
// missed something, and the ring restarts at that frame.

// HubConfig configures the Server's subscriber hub (Config.Hub).
// DefaultHubConfig returns the defaults.
type HubConfig struct {
	// Partitions is the pipeline's partition count P, which addresses
	// snapshot requests (tc.snap.<p>.<tenant>.<thread>).
	Partitions int
	// SnapshotTimeout bounds one snapshot request, the whole reply
	// included (all its parts and windows).
	SnapshotTimeout time.Duration
	// SnapshotRetry bounds how long a snapshot request is retried while the
	// pipeline answers "busy" or times out (a join storm), with jittered
	// exponential backoff. Past it the
	// join fails with ErrSnapshotBusy (HTTP 503 with Retry-After).
	SnapshotRetry time.Duration
	// RingFrames and RingBytes bound each thread's ring of recent frames,
	// which is what lets a client resume with no snapshot.
	RingFrames int
	RingBytes  int
	// IdleRingBytes bounds the ring of a feed that has lingered (see
	// Linger) for IdleTrimAfter: Sweep then cuts its ring to its newest
	// frames within IdleRingBytes (none, if the newest alone is larger)
	// without their cached encodings, and lets go of its cached snapshot;
	// until it is active again the ring stays within the bound and no
	// snapshot is cached. So the feeds lingering for longer than
	// IdleTrimAfter hold at most MaxIdleFeeds × IdleRingBytes of frames (a
	// frame counts its payload plus 64 bytes), whatever RingBytes is; a
	// client resuming from a cursor older than what was kept gets a
	// snapshot instead. Zero means the default; it is capped at RingBytes.
	IdleRingBytes int
	// IdleTrimAfter is how long a lingering feed keeps its whole ring, so
	// that a client that dropped and reconnects (an EventSource retries
	// after 2 s) resumes from it however far behind it was. Zero means the
	// default; negative trims at the first Sweep.
	IdleTrimAfter time.Duration
	// QueueBytes bounds each subscriber's queue. Past it the queue is
	// dropped and the subscriber resynchronised (ReasonOverflow), unless
	// consolidating it (CoalesceBytes) brings it back under.
	QueueBytes int
	// CoalesceBytes is the high-water mark of a subscriber's queue: past
	// it, the frames queued for that subscriber are consolidated by
	// meaning, for it alone (coalesce.go): AG-UI events compacted with the
	// reducer's rules, view change documents merged. Fewer, larger
	// messages, no reset, the same view. Zero means the default; negative
	// turns consolidation off (a queue past QueueBytes is dropped). It is
	// capped at QueueBytes.
	CoalesceBytes int
	// JoinWait is how long a joiner waits for frames still in flight to
	// reach the seq of a snapshot newer than the feed, before adopting it.
	JoinWait time.Duration
	// Linger keeps a thread's subscription and ring after its last local
	// subscriber left, so that a client reconnecting within it resumes
	// from the ring instead of a snapshot. Sweep ends lingering feeds.
	Linger time.Duration
	// MaxIdleFeedsPerTenant and MaxIdleFeeds bound the lingering feeds
	// (each one a NATS subscription with its delivery goroutine, and a
	// ring) of one tenant and of the whole hub. A feed whose last
	// subscriber leaves when a bound is reached pushes out the oldest
	// lingering feed of its tenant (per-tenant bound) or of the hub
	// (overall bound), which ends at once. Active feeds are never ended by
	// them. Zero means the default; negative means no bound.
	MaxIdleFeedsPerTenant int
	MaxIdleFeeds          int
	// MaxMessageBytes bounds a frame or a snapshot reply assembled from
	// parts (wire.Assembler.Max): the memory one assembly may take. A
	// larger one is dropped as announced by its first part — a frame is
	// then a lost frame (its subscribers resynchronise), a snapshot fails
	// with wire.ErrTooLarge. It must exceed the pipeline's largest view
	// (its snapshot reply holds the view and the snapshot events, about
	// twice the view). Zero means the default.
	MaxMessageBytes int
	// EventStream is the pipeline's JetStream event stream. A client
	// cursor ahead of a thread's snapshot is checked against the last
	// event the stream holds for the thread (one request): a cursor past
	// it was never real and the snapshot is sent at once; only a cursor
	// the stream holds is waited for (subscriber.catchUp). Empty: the
	// pipeline's default stream.
	EventStream string
}

// DefaultHubConfig returns the defaults.
func DefaultHubConfig() HubConfig {
	return HubConfig{
		Partitions:      wire.DefaultParts,
		SnapshotTimeout: 5 * time.Second,
		SnapshotRetry:   15 * time.Second,
		RingFrames:      1024,
		RingBytes:       4 << 20,
		// Some fifty frames of a thread streaming text (frames are a few
		// hundred bytes). MaxIdleFeeds lingering feeds at it hold 160 MB
		// of frames at most, which with their 13 kB each is a little over
		// half the Helm chart's 512 MiB fanout limit in the worst case.
		IdleRingBytes: 16 << 10,
		// Five times the SSE retry delay: a client that dropped is back
		// well within it and resumes from the whole ring. (Cutting at
		// once made the dashboard's hot thread need a snapshot on every
		// reconnect: a client that reconnects was behind by more than a
		// small ring.)
		IdleTrimAfter: 10 * time.Second,
		QueueBytes:    1 << 20,
		// Low enough to act while the backlog is small: a reader that
		// stalls has some 64 KB of small messages in the kernel's socket
		// buffers already before its queue grows.
		CoalesceBytes: 32 << 10,
		JoinWait:      250 * time.Millisecond,
		Linger:        time.Minute,
		// A lingering feed of a thread that gets no frames holds about
		// 13 kB here (BenchmarkIdleFeedFootprint: the subscription's
		// delivery goroutine, the ring's slot array), plus the NATS
		// server's subscription; one with traffic also keeps its ring,
		// up to IdleRingBytes. 1,000 per tenant is more distinct threads than
		// a tenant's users leave on one node within a Linger in normal use
		// (a node serves a few thousand subscribers). 10,000 overall caps
		// the empty ones at about 130 MB, a quarter of the Helm chart's
		// 512 MiB fanout limit, and takes 10 tenants at their bound to
		// fill.
		MaxIdleFeedsPerTenant: 1000,
		MaxIdleFeeds:          10000,
		// Twice the pipeline's default largest view (256 MiB), and its
		// snapshot events.
		MaxMessageBytes: 1 << 30,
		EventStream:     wire.DefaultStream,
	}
}

// Errors of the hub.
var (
	ErrHubClosed = errors.New("fanout: hub closed")
	ErrCatchUp   = errors.New("fanout: could not bring the subscriber up to date")
	ErrRunSplice = errors.New("fanout: an agui stream cannot be resynchronised in place; it must restart")
)

const numShards = 64

// maxHeld bounds how many frames of a burst are enqueued before writers are
// woken (onMsg).
const maxHeld = 8

// hub keeps, per thread, one NATS subscription for all local subscribers
// and shares each frame's encoded bytes among them. Safe for concurrent use.
// It starts no goroutines of its own (Reconcile's have returned when it
// returns): frames are handled in the NATS subscription callbacks (owned by
// the nats.Conn, stopped by Close's unsubscribes), and each subscriber is
// drained by its caller's goroutine.
type hub struct {
	nc     *nats.Conn
	req    *wire.Requester // snapshot and window requests, one reply subscription for all
	cfg    HubConfig
	m      *Metrics
	log    *slog.Logger
	shards [numShards]hubShard
	idle   idleSet
	// closing is closed by Close: snapshot retries stop waiting.
	closing   chan struct{}
	closeOnce sync.Once
}

type hubShard struct {
	mu     sync.Mutex
	feeds  map[feedKey]*feed
	closed bool
	_      [40]byte // keep neighbouring shard locks off one cache line
}

type feedKey struct{ tenant, token string }

// newHub returns a hub reading frames from nc. m and log may be nil.
func newHub(nc *nats.Conn, cfg HubConfig, m *Metrics, log *slog.Logger) *hub {
	d := DefaultHubConfig()
	if cfg.Partitions <= 0 {
		cfg.Partitions = d.Partitions
	}
	if cfg.SnapshotTimeout <= 0 {
		cfg.SnapshotTimeout = d.SnapshotTimeout
	}
	if cfg.SnapshotRetry <= 0 {
		cfg.SnapshotRetry = d.SnapshotRetry
	}
	if cfg.RingFrames <= 0 {
		cfg.RingFrames = d.RingFrames
	}
	if cfg.RingBytes <= 0 {
		cfg.RingBytes = d.RingBytes
	}
	if cfg.IdleRingBytes <= 0 {
		cfg.IdleRingBytes = d.IdleRingBytes
	}
	cfg.IdleRingBytes = min(cfg.IdleRingBytes, cfg.RingBytes)
	if cfg.IdleTrimAfter == 0 {
		cfg.IdleTrimAfter = d.IdleTrimAfter
	}
	cfg.IdleTrimAfter = max(cfg.IdleTrimAfter, 0)
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = d.QueueBytes
	}
	switch {
	case cfg.CoalesceBytes == 0:
		cfg.CoalesceBytes = min(d.CoalesceBytes, cfg.QueueBytes)
	case cfg.CoalesceBytes < 0:
		cfg.CoalesceBytes = 0
	case cfg.CoalesceBytes > cfg.QueueBytes:
		cfg.CoalesceBytes = cfg.QueueBytes
	}
	if cfg.JoinWait <= 0 {
		cfg.JoinWait = d.JoinWait
	}
	if cfg.Linger < 0 {
		cfg.Linger = 0
	}
	cfg.MaxIdleFeedsPerTenant = idleBound(cfg.MaxIdleFeedsPerTenant, d.MaxIdleFeedsPerTenant)
	cfg.MaxIdleFeeds = idleBound(cfg.MaxIdleFeeds, d.MaxIdleFeeds)
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = d.MaxMessageBytes
	}
	if m == nil {
		m = NewMetrics()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &hub{nc: nc, req: wire.NewRequester(nc), cfg: cfg, m: m, log: log, closing: make(chan struct{})}
	h.idle.init(cfg.MaxIdleFeedsPerTenant, cfg.MaxIdleFeeds, m)
	for i := range h.shards {
		h.shards[i].feeds = make(map[feedKey]*feed)
	}
	return h
}

func (h *hub) shard(k feedKey) *hubShard {
	// FNV-1a over tenant and token, inlined to avoid allocating.
	x := uint32(2166136261)
	for i := 0; i < len(k.tenant); i++ {
		x = (x ^ uint32(k.tenant[i])) * 16777619
	}
	x = (x ^ '.') * 16777619
	for i := 0; i < len(k.token); i++ {
		x = (x ^ uint32(k.token[i])) * 16777619
	}
	return &h.shards[x%numShards]
}

// Subscribe registers a subscriber to tenant's thread in variant v and
// brings it up to date before returning: from the thread's ring when after is
// a position the node still has (no gap, no duplicate), else with a snapshot
// (nothing at all when the snapshot is exactly at after). The caller must
// drain it (Ready, Take, CatchUp) and Close it. tenant must already be
// validated (wire.ValidTenant); thread is the raw id, never trusted to
// name a tenant.
func (h *hub) Subscribe(ctx context.Context, tenant, thread string, v Variant, after Cursor) (*subscriber, error) {
	return h.SubscribeWindow(ctx, tenant, thread, v, after, 0)
}

// SubscribeWindow is Subscribe with a window: when window > 0, every
// snapshot the subscriber gets (at the join, and at each resync) is the
// windowed snapshot of the newest window messages (wire/frame.go), and
// in view mode the frames' restatements (allMessages, view) are windowed to
// it too (windowChanges). window 0 is Subscribe.
func (h *hub) SubscribeWindow(ctx context.Context, tenant, thread string, v Variant, after Cursor, window int) (*subscriber, error) {
	f, err := h.acquire(ctx, tenant, thread)
	if err != nil {
		return nil, err
	}
	s := &subscriber{feed: f, variant: v, window: max(window, 0), limit: h.cfg.QueueBytes, nextCoalesce: h.cfg.CoalesceBytes, signal: make(chan struct{}, 1)}
	f.mu.Lock()
	f.subs[s] = struct{}{}
	if !v.ViewMode() {
		f.aguiSubs++
	}
	f.mu.Unlock()
	h.m.Subscribers.WithLabelValues(v.String()).Inc()
	if err := s.catchUp(ctx, after, ReasonJoin); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close unsubscribes every feed and refuses new subscribers. Subscribers
// still open keep their queues; their writers end them (Server does so
// first). Idempotent.
func (h *hub) Close() {
	h.closeOnce.Do(func() {
		close(h.closing)
		_ = h.req.Close()
	})
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		sh.closed = true
		h.idle.mu.Lock()
		for k, f := range sh.feeds {
			delete(sh.feeds, k)
			h.idle.removeLocked(f)
			if f.sub != nil {
				_ = f.sub.Unsubscribe()
			}
			h.m.Feeds.Dec()
		}
		h.idle.mu.Unlock()
		sh.mu.Unlock()
	}
}

// acquire returns the thread's feed, creating it (and its NATS subscription)
// on first use. Creation happens outside the shard lock; other acquirers of
// the same thread wait on ready.
func (h *hub) acquire(ctx context.Context, tenant, thread string) (*feed, error) {
	k := feedKey{tenant: tenant, token: wire.EncodeThread(thread)}
	sh := h.shard(k)
	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		return nil, ErrHubClosed
	}
	f := sh.feeds[k]
	creator := f == nil
	if creator {
		f = &feed{hub: h, key: k, thread: thread, subs: make(map[*subscriber]struct{}), ready: make(chan struct{}),
			ring: newRing(h.cfg.RingFrames), parts: wire.Assembler{Max: h.cfg.MaxMessageBytes, MaxOpen: 1}}
		sh.feeds[k] = f
		h.m.Feeds.Inc()
	} else if f.refs == 0 {
		h.idle.remove(f) // lingering: active again
		f.trimmed.Store(false)
	}
	f.refs++
	sh.mu.Unlock()
	if creator {
		// Not under ctx: the feed is every acquirer's, and a creator that
		// leaves must not fail the others waiting on ready with its own
		// cancellation. start is bounded by SnapshotTimeout.
		f.err = f.start(context.WithoutCancel(ctx))
		close(f.ready)
	} else {
		select {
		case <-f.ready:
		case <-ctx.Done():
			h.release(f)
			return nil, ctx.Err()
		}
	}
	if f.err != nil {
		h.release(f)
		return nil, f.err
	}
	return f, nil
}

// release drops one reference. The feed of a thread nobody here reads any
// more lingers (subscribed, its ring growing; Sweep cuts it to
// IdleRingBytes after IdleTrimAfter) until Sweep ends it, unless it failed
// to start or Linger is zero; if that makes one idle bound overflow, the
// oldest lingering feed it applies to ends now.
func (h *hub) release(f *feed) {
	sh := h.shard(f.key)
	sh.mu.Lock()
	f.refs--
	current := sh.feeds[f.key] == f
	end := f.refs == 0 && current && (f.err != nil || h.cfg.Linger == 0)
	var (
		victim *feed
		bound  string
	)
	if f.refs == 0 {
		f.idleSince = time.Now()
		if current && !end {
			victim, bound = h.idle.add(f)
		}
	}
	if end {
		delete(sh.feeds, f.key)
		h.m.Feeds.Dec()
	}
	sh.mu.Unlock()
	if end && f.sub != nil {
		_ = f.sub.Unsubscribe()
	}
	if victim != nil {
		h.endIdle(victim, bound)
	}
}

// trimIdle cuts a feed that Sweep marked trimmed down to IdleRingBytes of
// frames, without the wire encodings cached on them, and lets go of its
// cached snapshot, unless it is active again by now (Sweep released the
// shard lock before feed.mu was taken). What it cuts is a cache: a resume
// from before the ring's new start gets a snapshot, and a frame sent again
// is encoded again.
//
// acquire clears trimmed without feed.mu, so a feed acquired again right
// after the check may still be trimmed once: harmless, for the same reason.
func (f *feed) trimIdle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.trimmed.Load() {
		return
	}
	f.cutLocked()
	f.ring.each(func(fr *frame) { fr.dropEncodings() })
	f.snap = nil
	clear(f.wsnaps)
}

// cutLocked keeps the ring within IdleRingBytes, the newest frame too when
// it alone is larger, and moves lo past what it drops.
func (f *feed) cutLocked() {
	if n, last := f.ring.trim(f.hub.cfg.IdleRingBytes); n > 0 {
		f.lo = last
	}
}

// endIdle ends v, which idleSet.add took out of the idle lists, unless it
// stopped being that same lingering feed in between (the locks were
// released): re-acquired (refs > 0), ended by Sweep or Close (gone from its
// shard), or re-acquired and released again (back in the idle lists, a new
// idle period that the bound did not count against).
func (h *hub) endIdle(v *feed, bound string) {
	sh := h.shard(v.key)
	sh.mu.Lock()
	end := v.refs == 0 && sh.feeds[v.key] == v && !h.idle.linked(v)
	if end {
		delete(sh.feeds, v.key)
		h.m.Feeds.Dec()
	}
	sh.mu.Unlock()
	if end {
		h.m.IdleEnded.WithLabelValues(bound).Inc()
		if v.sub != nil {
			_ = v.sub.Unsubscribe()
		}
	}
}

// Sweep ends the feeds that have had no subscriber for longer than Linger
// before now, cuts the rings of those idle for longer than IdleTrimAfter
// (trimIdle), and returns how many it ended. Server.Run calls it
// periodically.
func (h *hub) Sweep(now time.Time) int {
	n := 0
	var subs []*nats.Subscription
	var trim []*feed
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		for k, f := range sh.feeds {
			if f.refs != 0 {
				continue
			}
			switch idle := now.Sub(f.idleSince); {
			case idle > h.cfg.Linger:
				delete(sh.feeds, k)
				h.idle.remove(f)
				h.m.Feeds.Dec()
				if f.sub != nil {
					subs = append(subs, f.sub)
				}
				n++
			case idle > h.cfg.IdleTrimAfter && !f.trimmed.Load():
				f.trimmed.Store(true) // with refs, under the shard lock
				trim = append(trim, f)
			}
		}
		sh.mu.Unlock()
	}
	for _, f := range trim {
		f.trimIdle()
	}
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
	return n
}

// feed is one thread on this node. Its fields after ready are guarded by mu
// except the immutable ones (hub, key, thread, sub, err).
type feed struct {
	hub       *hub
	key       feedKey
	thread    string
	sub       *nats.Subscription
	err       error
	ready     chan struct{}
	refs      int       // guarded by the shard lock
	idleSince time.Time // guarded by the shard lock; when refs last became 0
	idle      idleLinks // guarded by idleSet.mu
	// trimmed is set by Sweep on a feed lingering for longer than
	// IdleTrimAfter and cleared when it is acquired again, both under the
	// shard lock; read by onMsg, trimIdle and requestSnapshot under mu. It
	// stays set on a feed ended afterwards (swept, pushed out, closed).
	trimmed  atomic.Bool
	dropSeen atomic.Int64 // sub.Dropped() at the last reconcile check
	suspect  atomic.Bool  // a reconcile could not reach the pipeline: retry
	// parts joins frames sent in parts; used only by onMsg, which the
	// subscription calls one message at a time.
	parts wire.Assembler

	mu       sync.Mutex
	subs     map[*subscriber]struct{}
	aguiSubs int // of subs, those in agui mode: the ones the verdict fold (vf) serves
	ring     ring
	known    bool              // lo and hi are meaningful
	lo, hi   uint64            // see the NOTE at the top of the file
	snap     *snapshot         // the latest whole snapshot
	wsnaps   map[int]*snapshot // the latest windowed ones, by window (at most maxCachedWindows)
	calls    map[int]*snapCall // snapshot requests in flight, by window (0: whole)
	run      openRun           // the run open at hi (runs.go)
	advanced chan struct{}     // closed when hi moves; made on demand by waiters
	holding  bool              // onMsg is delivering: enqueue defers wake-ups to dirty
	held     int               // frames delivered since the last wake-up pass
	dirty    []*subscriber     // subscribers with items whose writer is not yet woken
	vf       *verdictFold      // the events' verdicts for agui consolidation (coalesce.go); nil: none
}

type snapCall struct {
	done chan struct{}
	sn   *snapshot // the reply, when err is nil
	err  error
}

func (f *feed) start(ctx context.Context) error {
	h := f.hub
	sub, err := h.nc.Subscribe(wire.ViewSubject(f.key.tenant, f.key.token), f.onMsg)
	if err != nil {
		return fmt.Errorf("fanout: subscribe: %w", err)
	}
	// Under the shard lock, which Close holds while it unsubscribes every
	// feed: either Close finds the subscription, or this finds the hub
	// closed and unsubscribes it here.
	sh := h.shard(f.key)
	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		_ = sub.Unsubscribe()
		return ErrHubClosed
	}
	f.sub = sub
	sh.mu.Unlock()
	// The server must have registered the subscription before we ask for
	// a snapshot, or frames published in between would be lost.
	fctx, cancel := context.WithTimeout(ctx, h.cfg.SnapshotTimeout)
	defer cancel()
	if err := h.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("fanout: subscribe flush: %w", err)
	}
	return nil
}

// onMsg runs on the subscription's own goroutine (nats.go delivers one
// subscription's messages in order, one at a time).
func (f *feed) onMsg(part *nats.Msg) {
	fr := f.decode(part)
	f.mu.Lock()
	defer f.mu.Unlock()
	// Writers are woken once per burst, not once per frame: while more
	// frames wait in the subscription, enqueue only marks subscribers
	// dirty, and the last message of the burst wakes them all. A writer
	// then takes several frames in one write — fewer syscalls on both ends
	// of the connection, which is what the fan-out benchmark's profile is
	// made of. The last message may be one that delivers nothing (a part,
	// a dropped frame): it ends the burst all the same, or the frames
	// before it would wait for the next heartbeat.
	f.holding = true
	defer f.endBurstLocked(part.Sub, fr != nil)
	if fr == nil {
		return
	}
	if f.known && fr.seq <= f.hi {
		return // the feed (or an adopted snapshot) is already past it
	}
	if !f.known || fr.prev != f.hi {
		f.ring.reset()
		f.lo, f.known = fr.prev, true
		f.run = openRun{} // what came before fr was not seen
	}
	fr.runBefore = f.run
	f.run = f.run.after(frameRun(fr))
	if n, last := f.ring.push(fr, f.hub.cfg.RingBytes); n > 0 {
		f.lo = last
	}
	if f.trimmed.Load() {
		f.cutLocked() // nobody reads it here now, this frame included
	}
	f.hi = fr.seq
	f.followLocked(fr)
	for s := range f.subs {
		if s.state == stLive {
			f.deliverLocked(s, fr)
		}
	}
	// Encodings are kept for the newest frames only, which are what live
	// subscribers take. A frame's encodings (one per variant, and the
	// windowed ones) are not counted in RingBytes and would otherwise stay
	// as long as the frame does: several times the frame's own bytes, and
	// objects for the collector to mark. An older frame that a resuming
	// subscriber takes from the ring is encoded again.
	if i := f.ring.n - 1 - keepEncoded; i >= 0 {
		f.ring.at(i).dropEncodings()
	}
	if f.advanced != nil {
		close(f.advanced)
		f.advanced = nil
	}
}

// decode returns the frame that part completes, or nil: a part that is not
// the last, or a message dropped (counted in BadFrames). A frame in parts
// is handled when its last part arrives, whole; one that lost a part is
// dropped whole, and the next frame's Tc-Prev shows the gap to its
// subscribers as for a frame lost whole.
func (f *feed) decode(part *nats.Msg) *frame {
	m, err := f.parts.Add(part)
	if err != nil {
		f.hub.m.BadFrames.Inc()
		f.hub.log.Warn("fanout: dropping frame", "subject", part.Subject, "err", err)
	}
	if m == nil {
		return nil
	}
	fr, err := decodeFrame(m)
	if err != nil {
		f.hub.m.BadFrames.Inc()
		f.hub.log.Warn("fanout: dropping frame", "subject", m.Subject, "err", err)
		return nil
	}
	f.hub.m.Frames.Inc()
	if fr.sentAt > 0 {
		f.hub.m.stageTransit.Observe(float64(fr.recvAt-fr.sentAt) / 1e9)
	}
	return fr
}

// endBurstLocked ends onMsg's handling of one message (framed: it was a
// frame) and wakes the dirty subscribers' writers when no more messages
// wait in sub, or every maxHeld frames, so that a long burst neither
// delays the first frames nor fills queues unseen. Pending counts the
// messages nats.go has read but not finished handing to us, this one
// included: it is decremented after the callback returns. sub is the
// message's, not f.sub, which is set when Subscribe returns, possibly
// after the first message's callback started.
func (f *feed) endBurstLocked(sub *nats.Subscription, framed bool) {
	f.holding = false
	if framed {
		f.held++
	}
	if n, _, err := sub.Pending(); err == nil && n > 1 && f.held < maxHeld {
		return
	}
	f.held = 0
	for i, s := range f.dirty {
		s.notifyData()
		f.dirty[i] = nil
	}
	f.dirty = f.dirty[:0]
}

// deliverLocked enqueues fr to the live subscriber s, or flags a resync
// when fr does not follow what s has.
func (f *feed) deliverLocked(s *subscriber, fr *frame) {
	if fr.seq <= s.last {
		return
	}
	if fr.prev != s.last {
		s.dropLocked(ReasonGap)
		f.hub.m.Drops.WithLabelValues(ReasonGap).Inc()
		return
	}
	enc := fr.encoding(s.variant, s.window)
	s.last = fr.seq
	if !s.variant.ViewMode() {
		s.run = s.run.after(frameRun(fr))
	}
	s.enqueue(enc, fr, fr.seq, fr.eventTS, false)
}

type fit uint8

const (
	fitOK     fit = iota // a boundary the feed can continue from
	fitFuture            // newer than anything the feed has seen yet
	fitStale             // older than the ring, or inside a frame
)

func (f *feed) fitLocked(seq uint64) fit {
	switch {
	case !f.known:
		return fitFuture
	case seq == f.hi || seq == f.lo:
		return fitOK
	case seq > f.hi:
		return fitFuture
	case seq < f.lo:
		return fitStale
	case f.ring.find(seq) != nil:
		return fitOK
	}
	return fitStale
}

// replayLocked delivers every ring frame after seq to s.
func (f *feed) replayLocked(s *subscriber, seq uint64) {
	n := 0
	f.ring.each(func(fr *frame) {
		if fr.seq > seq {
			f.deliverLocked(s, fr)
			n++
		}
	})
	if n >= replayCoalesceMin {
		// The client has read none of them: it gains nothing from their
		// steps, and a slow one would spend as long on them as they took
		// to happen. Its first Take consolidates them (coalesce.go).
		s.markSlow()
	}
}

// replayCoalesceMin is how many frames from the ring a joining or resuming
// subscriber takes one by one; from that many on they are consolidated.
const replayCoalesceMin = 8

// adoptLocked makes sn's seq (a snapshot newer than the feed) the feed's
// position, and sn's run the run open there, when the frames up to it
// never came: frames at or before it are then ignored. Every live
// subscriber behind it is resynchronised now (ReasonGap): the frames it
// lacks will never reach the feed, and the thread may send no next frame
// whose Tc-Prev would show the gap.
func (f *feed) adoptLocked(sn *snapshot) {
	seq := sn.seq
	f.ring.reset()
	f.lo, f.hi, f.known = seq, seq, true
	f.run = snapshotRun(sn)
	n := 0
	for s := range f.subs {
		if s.state == stLive && s.last < seq {
			s.dropLocked(ReasonGap)
			n++
		}
	}
	if n > 0 {
		f.hub.m.Drops.WithLabelValues(ReasonGap).Add(float64(n))
	}
}

// runAtLocked returns the run open at seq, a position the feed can continue
// from (fitLocked: fitOK).
func (f *feed) runAtLocked(seq uint64) openRun {
	if seq == f.hi {
		return f.run
	}
	if fr := f.ring.find(seq); fr != nil {
		return fr.runBefore.after(frameRun(fr))
	}
	if f.ring.n > 0 { // seq is lo, the prev of the oldest frame
		return f.ring.at(0).runBefore
	}
	return f.run
}

// learnRunLocked learns the run open at each position after sn, a
// snapshot the feed can continue from (fitLocked: fitOK), from sn, when the
// feed does not know the run open now. A feed that does not has seen no
// run event since its ring last restarted: no frame in the ring changes
// the run, and none knows the run open before it.
func (f *feed) learnRunLocked(sn *snapshot) {
	if f.run.known {
		return
	}
	o := snapshotRun(sn)
	for i := 0; i < f.ring.n; i++ {
		if fr := f.ring.at(i); fr.seq > sn.seq {
			fr.runBefore = o
			o = o.after(frameRun(fr))
		}
	}
	f.run = o
}

// maxCachedWindows bounds the windowed snapshots a feed caches: windows
// are chosen by clients, and a feed keeps the latest reply of at most this
// many distinct ones (joiners of another window ask the pipeline).
const maxCachedWindows = 4

// cachedLocked returns the feed's latest snapshot for window (0: whole).
func (f *feed) cachedLocked(window int) *snapshot {
	if window == 0 {
		return f.snap
	}
	return f.wsnaps[window]
}

// cacheLocked makes sn the feed's latest snapshot for its window.
func (f *feed) cacheLocked(sn *snapshot) {
	if sn.window == 0 {
		f.snap = sn
		return
	}
	if f.wsnaps == nil {
		f.wsnaps = make(map[int]*snapshot)
	}
	if _, ok := f.wsnaps[sn.window]; !ok && len(f.wsnaps) >= maxCachedWindows {
		for w := range f.wsnaps { // any one: the bound, not the choice, is what matters
			delete(f.wsnaps, w)
			break
		}
	}
	f.wsnaps[sn.window] = sn
}

// requestSnapshot performs one snapshot request for the feed and window (0:
// the whole view), shared by every caller that needs one for that window
// meanwhile (single flight), and returns the reply. It is also cached
// (cacheLocked) for joiners, unless the feed was trimmed (it lingers, nobody
// is there to join; trimIdle let the cache go).
func (f *feed) requestSnapshot(ctx context.Context, window int) (*snapshot, error) {
	f.mu.Lock()
	call := f.calls[window]
	if call != nil {
		f.mu.Unlock()
		select {
		case <-call.done:
			return call.sn, call.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	call = &snapCall{done: make(chan struct{})}
	if f.calls == nil {
		f.calls = make(map[int]*snapCall)
	}
	f.calls[window] = call
	f.mu.Unlock()

	// The request outlives the caller that happens to lead it: the other
	// joiners wait for it too. It is bounded by SnapshotRetry.
	sn, err := f.hub.snapshot(context.WithoutCancel(ctx), f.key.tenant, f.key.token, window)
	f.mu.Lock()
	if err == nil {
		// The latest reply is the pipeline's word, even when older than
		// the one cached (an ingest restarted from a checkpoint replays
		// up to it): fitLocked decides whether we can continue from it.
		if !f.trimmed.Load() {
			f.cacheLocked(sn)
		}
		if !f.known {
			// No frame since we subscribed: the snapshot is the position
			// (every later frame is still to come, in order). Nobody is
			// live yet (going live needs a known position), so nobody is
			// resynchronised.
			f.adoptLocked(sn)
		}
		f.startVerdictsLocked(sn)
	}
	call.sn, call.err = sn, err
	delete(f.calls, window)
	f.mu.Unlock()
	close(call.done)
	return sn, err
}

// ring is a bounded FIFO of a thread's recent frames, oldest first, with
// increasing seqs. Its buffer grows as frames come, up to capacity: a
// thread that has framed a few times holds a few slots, not
// RingFrames (1,024 by default) pointers for the collector to scan on
// every cycle.
type ring struct {
	buf   []*frame
	start int
	n     int
	bytes int
	max   int // capacity in frames
}

// keepEncoded is how many of a ring's newest frames keep their encodings.
const keepEncoded = 8

// ringInitial is the slots a ring starts with.
const ringInitial = 8

func newRing(capacity int) ring {
	capacity = max(capacity, 1)
	return ring{buf: make([]*frame, min(capacity, ringInitial)), max: capacity}
}

// grow doubles the buffer (up to max), the frames in order from slot 0.
func (r *ring) grow() {
	buf := make([]*frame, min(2*len(r.buf), r.max))
	for i := range r.n {
		buf[i] = r.at(i)
	}
	r.buf, r.start = buf, 0
}

func (r *ring) reset() {
	clear(r.buf)
	r.start, r.n, r.bytes = 0, 0, 0
}

func (r *ring) at(i int) *frame { return r.buf[(r.start+i)%len(r.buf)] }

// push appends fr, evicting the oldest frames to stay within the frame
// and byte bounds (the newest frame is always kept). It returns how many it
// evicted and the seq of the last of them: the feed's new lo. (It returned
// the evicted frames until the slice, one allocation per push of a busy
// thread whose ring is full, showed in BenchmarkRingPush.)
func (r *ring) push(fr *frame, maxBytes int) (evicted int, last uint64) {
	for r.n > 0 && (r.n == r.max || r.bytes+fr.size > maxBytes) {
		last = r.evict()
		evicted++
	}
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.start+r.n)%len(r.buf)] = fr
	r.n++
	r.bytes += fr.size
	return evicted, last
}

// trim evicts the oldest frames until the ring is within maxBytes, the
// newest too when it alone is larger, and returns as push does. An emptied
// ring is a valid state: the feed's lo and hi are then equal (the last
// evicted seq), as after adoptLocked.
func (r *ring) trim(maxBytes int) (evicted int, last uint64) {
	for r.n > 0 && r.bytes > maxBytes {
		last = r.evict()
		evicted++
	}
	return evicted, last
}

// evict removes the oldest frame and returns its seq; the ring must not be
// empty.
func (r *ring) evict() uint64 {
	old := r.buf[r.start]
	r.buf[r.start] = nil
	r.start = (r.start + 1) % len(r.buf)
	r.n--
	r.bytes -= old.size
	return old.seq
}

// find returns the frame with that seq, or nil (binary search: seqs increase).
func (r *ring) find(seq uint64) *frame {
	lo, hi := 0, r.n
	for lo < hi {
		mid := (lo + hi) / 2
		if r.at(mid).seq < seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < r.n && r.at(lo).seq == seq {
		return r.at(lo)
	}
	return nil
}

func (r *ring) each(fn func(*frame)) {
	for i := 0; i < r.n; i++ {
		fn(r.at(i))
	}
}
