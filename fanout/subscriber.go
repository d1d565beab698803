package fanout

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

type subState uint8

const (
	stJoining subState = iota // registered, not yet brought up to date: frames skip it
	stLive                    // receives every frame after last
	stResync                  // queue dropped; its writer will catch it up
)

// item is one queued wire message. b is shared read-only with every other
// subscriber of the same variant; nobody writes into it.
type item struct {
	b  []byte
	ts int64 // event timestamp (Unix ms) for the latency metric, 0 if none
	// fr is the frame whose encoding b is (or is part of), for
	// consolidation (coalesce.go): its shared one, or its windowed one for
	// a windowed subscriber (window.go); nil for snapshots and partial
	// frames.
	fr *frame
	// co is set on the items of a consolidated window.
	co *coalesced
}

// subscriber is one connection's view of a thread: a bounded queue of wire
// messages filled by the hub and drained by exactly one goroutine (the
// connection's writer) through Ready, Take and CatchUp. Close may be called
// from any goroutine.
type subscriber struct {
	feed    *feed
	variant Variant
	window  int // > 0: joins and resyncs take the windowed snapshot of the newest window messages
	limit   int

	// Guarded by feed.mu.
	state subState
	last  uint64  // seq of the last frame (or snapshot) enqueued
	run   openRun // agui: the run the client has open, runs.go
	// start is the cursor the client held when it joined, where it can
	// resume from if its stream ends before anything is written: its
	// cursor when the ring held it, else 0 (a fresh start). Written by the
	// join, before the writer starts.
	start uint64

	mu     sync.Mutex
	queue  []item
	queued int // bytes in queue
	// nextCoalesce: queued bytes past which the queue is consolidated
	// (coalesce.go); 0 when consolidation is off.
	nextCoalesce int
	// slow: the queue passed the high-water mark; Take consolidates what
	// it takes until the reader keeps up again.
	slow   bool
	cursor uint64 // seq reached once everything in queue is written
	resync string // non-empty: the queue was dropped for this reason
	closed bool
	dirty  bool          // queued items since the last Take (feed.dirty bookkeeping)
	signal chan struct{} // capacity 1: "there is something to take"
	once   sync.Once

	ctl atomic.Uint32 // ctl* bits raised for the writer (raise)
	// paced: the writer holds back for its client (pace.go); new frames
	// do not wake it, its own timer does.
	paced atomic.Bool
}

// Control bits for the writer, raised by timers (Server.pump).
const (
	ctlHeartbeat uint32 = 1 << iota
	ctlLifetime
	ctlExpired // the stream's token expired
)

// raise sets a control bit and wakes the writer.
func (s *subscriber) raise(bit uint32) {
	s.ctl.Or(bit)
	s.notify()
}

// markSlow makes the next Take consolidate what is queued, as for a queue
// that passed the high-water mark: the writer is holding back for its
// client (pace.go), and what it takes next should be one consolidated
// batch, however little is queued.
func (s *subscriber) markSlow() {
	s.mu.Lock()
	s.slow = true
	s.mu.Unlock()
}

// notifyData wakes the writer for new frames, unless it is paced.
func (s *subscriber) notifyData() {
	if !s.paced.Load() {
		s.notify()
	}
}

// Ready returns the channel that receives a value whenever Take or CatchUp
// has something to do.
func (s *subscriber) Ready() <-chan struct{} { return s.signal }

// Variant returns the wire variant the subscriber receives.
func (s *subscriber) Variant() Variant { return s.variant }

// Take appends everything queued to dst[:0] and returns it, with the cursor
// (seq) the client holds once it is written, and — when the queue was dropped
// — the reason, in which case the caller must call CatchUp before taking
// more. The returned byte slices are shared: the caller writes them and must
// not modify or retain them.
//
// A subscriber found slow (its queue passed the high-water mark since an
// earlier Take) has the frames queued since its last consolidation
// consolidated too before they are taken (coalesce.go), so that what a
// slow reader gets is consolidated all through.
func (s *subscriber) Take(dst []item) (items []item, cursor uint64, resync string) {
	s.mu.Lock()
	if s.slow && len(s.queue) > 1 && s.resync == "" {
		s.mu.Unlock()
		f := s.feed
		f.mu.Lock() // lock order: feed.mu, then subscriber.mu
		s.mu.Lock()
		if s.resync == "" {
			s.coalesceLocked()
		}
		f.mu.Unlock()
	}
	// Slow until a Take finds little queued: a reader keeping up again.
	s.slow = s.slow && s.queued >= s.feed.hub.cfg.CoalesceBytes/4
	items, s.queue = s.queue, dst[:0]
	s.queued = 0
	s.nextCoalesce = s.feed.hub.cfg.CoalesceBytes
	s.dirty = false
	cursor, resync = s.cursor, s.resync
	s.mu.Unlock()
	return items, cursor, resync
}

// CatchUp brings a view-mode subscriber whose queue was dropped up to date
// with a snapshot (or from the ring when it still covers its position). An
// agui subscriber cannot be (runs.go): CatchUp returns ErrRunSplice and the
// caller ends the stream.
func (s *subscriber) CatchUp(ctx context.Context) error {
	if !s.variant.ViewMode() {
		return ErrRunSplice
	}
	s.mu.Lock()
	reason := s.resync
	s.mu.Unlock()
	return s.catchUp(ctx, Cursor{}, reason)
}

// Close removes the subscriber from its thread; the last subscriber of a
// thread on this node ends the NATS subscription. Idempotent.
func (s *subscriber) Close() {
	s.once.Do(func() {
		f := s.feed
		f.mu.Lock()
		delete(f.subs, s)
		if !s.variant.ViewMode() {
			f.aguiSubs--
		}
		f.mu.Unlock()
		s.mu.Lock()
		s.closed = true
		s.queue, s.queued = nil, 0
		s.mu.Unlock()
		f.hub.m.Subscribers.WithLabelValues(s.variant.String()).Dec()
		f.hub.release(f)
	})
}

// enqueue appends msgs (all of one frame or snapshot; fr is the frame when
// msgs are its shared encoding) to the queue. Called with feed.mu held.
// Past the high-water mark the queue is consolidated (coalesce.go); past
// the byte limit, when consolidation cannot bring it back under, the whole
// queue is dropped and the subscriber flagged for resync. The limit bounds
// the backlog of frames: a
// snapshot (force) skips it and does not count against it, so that a view
// larger than the limit is delivered and the frames that follow it while
// it is being written are not dropped for its size; and a frame is always
// taken into an empty backlog, so that a frame larger than the limit (one
// large event) reaches a subscriber that keeps up.
func (s *subscriber) enqueue(msgs [][]byte, fr *frame, seq uint64, ts int64, force bool) {
	n := 0
	for _, b := range msgs {
		n += len(b)
	}
	s.mu.Lock()
	if s.closed || s.resync != "" {
		s.mu.Unlock()
		return
	}
	over := !force && s.queued > 0 && s.queued+n > s.limit
	if over && s.nextCoalesce <= 0 {
		s.mu.Unlock()
		s.dropLocked(ReasonOverflow)
		s.feed.hub.m.Drops.WithLabelValues(ReasonOverflow).Inc()
		return
	}
	for _, b := range msgs {
		if len(b) > 0 {
			s.queue = append(s.queue, item{b: b, ts: ts, fr: fr})
		}
	}
	if !force {
		s.queued += n
		if s.nextCoalesce > 0 && (over || s.queued > s.nextCoalesce) {
			s.coalesceLocked()
			s.slow = true
		}
		if over && s.queued > s.limit {
			s.mu.Unlock()
			s.dropLocked(ReasonOverflow)
			s.feed.hub.m.Drops.WithLabelValues(ReasonOverflow).Inc()
			return
		}
	}
	s.cursor = seq
	wake := !s.dirty
	s.dirty = true
	s.mu.Unlock()
	switch {
	case !s.feed.holding:
		s.notifyData()
	case wake:
		s.feed.dirty = append(s.feed.dirty, s)
	}
	if n > 0 {
		s.feed.hub.m.delivered[s.variant].Add(float64(len(msgs)))
	}
}

// rewindLocked undoes a look at the feed that brought s live (catchUp) but
// whose queue overflowed on the way: s is out of the feed's deliveries
// again, at last with run open, its queue empty and not slow (feed.mu
// held).
func (s *subscriber) rewindLocked(last uint64, run openRun) {
	s.state, s.last, s.run = stJoining, last, run
	s.mu.Lock()
	clear(s.queue)
	s.queue, s.queued, s.resync, s.slow = s.queue[:0], 0, "", false
	s.nextCoalesce = s.feed.hub.cfg.CoalesceBytes
	s.mu.Unlock()
}

// dropLocked drops the queue and flags a resync (feed.mu held).
func (s *subscriber) dropLocked(reason string) {
	s.state = stResync
	s.mu.Lock()
	clear(s.queue)
	s.queue, s.queued = s.queue[:0], 0
	s.resync = reason
	s.mu.Unlock()
	s.notify()
}

func (s *subscriber) notify() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// catchUp brings s live: from the ring when after (a client's cursor) is a
// position the feed still has, else with the feed's latest snapshot when the
// ring continues from it, else with a new snapshot request (shared with
// every subscriber of the thread that needs one at the same time). Frames
// from the ring that do not fit in s's queue count as a position the feed
// does not have: a new snapshot, with fewer frames after it, is asked for.
// Each attempt is bounded; a snapshot the feed cannot continue from (older
// than the ring, or with more frames after it than the queue takes) is
// retried a few times before giving up with ErrCatchUp.
//
// A snapshot older than what the client already has (its cursor, or what
// this subscriber delivered before a resync) is held back: it would take
// the client's view back. That happens when a partition's new owner answers
// from a checkpoint before replaying the events after it (after a crash of
// the old owner, which had published frames past its last checkpoint). Such
// a snapshot is asked for again with backoff until the owner has caught up,
// for at most HubConfig.SnapshotRetry; past that the older snapshot is sent
// after all (the thread's log was reset): a fresh start, never a silent
// gap. A client's cursor is first checked against the event stream
// (hub.storedSeq, one request): one past the thread's last stored event was
// never real, and the snapshot is sent at once, with no retry.
func (s *subscriber) catchUp(ctx context.Context, after Cursor, reason string) error {
	c := catchUpRun{s: s, after: after, reason: reason, backoff: snapBackoffMin}
	for attempt := 0; attempt < 4; {
		step, waitCh, err := c.look()
		switch step {
		case stepLive:
			return nil
		case stepFailed:
			return err
		case stepAgain:
			continue
		case stepWait:
			if err := c.waitFrames(ctx, waitCh); err != nil {
				return err
			}
			continue
		case stepBehind:
			if c.cursorBogus(ctx) {
				continue
			}
			if err := c.retryBehind(ctx); err != nil {
				return err
			}
			continue // not an attempt: the owner is catching up
		}
		if _, err := s.feed.requestSnapshot(ctx, s.window); err != nil {
			return err
		}
		attempt++
	}
	return ErrCatchUp
}

// catchUpRun is the state of one catchUp across its looks at the feed.
type catchUpRun struct {
	s      *subscriber
	after  Cursor // the client's cursor (not Valid: none)
	reason string // the Resyncs label of a catch-up from a snapshot

	waitUntil   time.Time     // when waiting for frames up to a cached snapshot ends
	behindUntil time.Time     // when an older snapshot is sent after all
	backoff     time.Duration // the next pause before asking for a snapshot again

	// checked: the stream was asked about the client's cursor; bogus: it
	// holds nothing that far, so the cursor raises no floor.
	checked, bogus bool
	// overflowed: the frames after the client's cursor did not fit in the
	// queue; a snapshot, newer, leaves fewer to send.
	overflowed bool
}

// catchUpStep is what one look at the feed decided.
type catchUpStep uint8

const (
	stepRequest catchUpStep = iota // no snapshot to use: ask for one (an attempt)
	stepLive                       // s is live, from the ring or a snapshot
	stepFailed                     // the cached snapshot cannot be sent: give up
	stepAgain                      // a snapshot was adopted as the position: look again
	stepWait                       // frames up to the cached snapshot are in flight
	stepBehind                     // the cached snapshot is older than what the client has
)

// look empties s's queue and brings s live if the feed can, under the
// feed's lock, and counts the resync when it did.
func (c *catchUpRun) look() (catchUpStep, chan struct{}, error) {
	f := c.s.feed
	f.mu.Lock()
	step, waitCh, resumed, err := c.lookLocked()
	f.mu.Unlock()
	if step == stepLive {
		if resumed {
			f.hub.m.Resyncs.WithLabelValues(ReasonResume).Inc()
		} else {
			f.hub.m.Resyncs.WithLabelValues(c.reason).Inc()
		}
	}
	return step, waitCh, err
}

// lookLocked is look's work under f.mu: s resumed from the ring at the
// client's cursor (resumed), or sent the feed's cached snapshot when the
// ring continues from it, or told what to do instead.
func (c *catchUpRun) lookLocked() (step catchUpStep, waitCh chan struct{}, resumed bool, err error) {
	s, f := c.s, c.s.feed
	s.mu.Lock()
	clear(s.queue)
	s.queue, s.queued, s.resync = s.queue[:0], 0, ""
	s.mu.Unlock()
	// A replay larger than the queue (the ring holds several QueueBytes)
	// would leave s dropped as it goes live, and an agui subscriber cannot
	// be resynchronised in place: its stream would end before writing
	// anything, and so would the client's reconnect with the same cursor.
	// So a look whose replay overflowed is undone, and a snapshot newer
	// than where the replay started, with fewer frames after it, is used
	// instead.
	last, run := s.last, s.run
	if c.after.Valid && !c.overflowed && f.resumeLocked(s, c.after) {
		if s.state == stLive {
			return stepLive, nil, true, nil
		}
		s.rewindLocked(last, run)
		c.overflowed = true
		return stepRequest, nil, false, nil
	}
	floor := s.last
	if c.after.Valid && c.after.Index < 0 && c.after.Seq > floor && !c.bogus {
		floor = c.after.Seq
	}
	sn := f.cachedLocked(s.window)
	if sn == nil {
		return stepRequest, nil, false, nil
	}
	if sn.seq < floor && (c.behindUntil.IsZero() || time.Now().Before(c.behindUntil)) {
		return stepBehind, nil, false, nil
	}
	switch f.fitLocked(sn.seq) {
	case fitOK:
		enc, ok := snapshotFor(s, sn, c.reason == ReasonJoin)
		if !ok {
			return stepFailed, nil, false, ErrRunSplice
		}
		f.learnRunLocked(sn)
		s.last, s.state = sn.seq, stLive
		s.enqueue(enc, nil, sn.seq, 0, true)
		if sn.window == 0 {
			f.startVerdictsLocked(sn)
		}
		f.replayLocked(s, sn.seq)
		if s.state != stLive {
			s.rewindLocked(last, run)
			return stepRequest, nil, false, nil
		}
		return stepLive, nil, false, nil
	case fitFuture:
		// Frames up to the snapshot are in flight: wait for them a
		// little, then adopt the snapshot as the position (which
		// resynchronises the live subscribers behind it).
		if c.waitUntil.IsZero() {
			c.waitUntil = time.Now().Add(f.hub.cfg.JoinWait)
		}
		if !time.Now().Before(c.waitUntil) {
			f.adoptLocked(sn)
			return stepAgain, nil, false, nil
		}
		if f.advanced == nil {
			f.advanced = make(chan struct{})
		}
		return stepWait, f.advanced, false, nil
	}
	return stepRequest, nil, false, nil
}

// waitFrames waits for the feed to advance (waitCh closed) or the frames
// wait to end, whichever is first.
func (c *catchUpRun) waitFrames(ctx context.Context, waitCh chan struct{}) error {
	t := time.NewTimer(time.Until(c.waitUntil))
	defer t.Stop()
	select {
	case <-waitCh:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// cursorBogus checks the client's cursor against the event stream, once,
// when the cached snapshot is behind it, and reports whether the stream
// holds nothing that far (the cursor was never real).
//
// Only the client vouches for its cursor. The stream says whether it is
// real: past the thread's last stored event it never was, and the snapshot
// is the answer, now (a fresh start). If the stream cannot say, the cursor
// is waited for as one the owner is replaying to.
func (c *catchUpRun) cursorBogus(ctx context.Context) bool {
	s := c.s
	if c.checked || !c.after.Valid || c.after.Seq <= s.last {
		return false
	}
	c.checked = true
	h := s.feed.hub
	if last, err := h.storedSeq(ctx, s.feed.key.tenant, s.feed.key.token); err == nil && last < c.after.Seq {
		c.bogus = true
		h.m.BogusCursors.Inc()
		return true
	}
	return false
}

// retryBehind pauses with backoff and asks for a new snapshot, for a cached
// one older than what the client has.
func (c *catchUpRun) retryBehind(ctx context.Context) error {
	h := c.s.feed.hub
	if c.behindUntil.IsZero() {
		c.behindUntil = time.Now().Add(h.cfg.SnapshotRetry)
	}
	h.m.SnapshotRetries.WithLabelValues(RetryBehind).Inc()
	t := time.NewTimer(rand.N(c.backoff) + time.Millisecond)
	select {
	case <-t.C:
	case <-h.closing:
		t.Stop()
		return ErrHubClosed
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
	c.backoff = min(2*c.backoff, snapBackoffMax)
	_, err := c.s.feed.requestSnapshot(ctx, c.s.window)
	return err
}

// resumeLocked continues s from the client's cursor when the feed has it.
func (f *feed) resumeLocked(s *subscriber, after Cursor) bool {
	if after.Index >= 0 {
		if s.variant != AguiSSE {
			return false
		}
		fr := f.ring.find(after.Seq)
		if fr == nil || after.Index >= len(fr.events) {
			return false
		}
		s.last, s.state = fr.seq, stLive
		s.run = fr.runBefore.after(runOf(fr.events[:after.Index+1])) // what the client saw of this frame
		s.enqueue(encodePartial(fr, s.variant, after.Index), nil, fr.seq, fr.eventTS, true)
		f.replayLocked(s, fr.seq)
		return true
	}
	if f.fitLocked(after.Seq) != fitOK {
		return false
	}
	s.last, s.state, s.start = after.Seq, stLive, after.Seq
	s.run = f.runAtLocked(after.Seq)
	s.mu.Lock()
	s.cursor = after.Seq
	s.mu.Unlock()
	f.replayLocked(s, after.Seq)
	return true
}
