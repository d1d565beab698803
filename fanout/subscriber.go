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
}

// Subscriber is one connection's view of a thread: a bounded queue of wire
// messages filled by the hub and drained by exactly one goroutine (the
// connection's writer) through Ready, Take and CatchUp. Close may be called
// from any goroutine.
type Subscriber struct {
	feed    *feed
	variant Variant
	window  int // > 0: joins and resyncs take the windowed snapshot of the newest window messages
	limit   int

	// Guarded by feed.mu.
	state subState
	last  uint64 // seq of the last frame (or snapshot) enqueued
	run   string // agui: the run the client has open ("" none), runs.go

	mu     sync.Mutex
	queue  []item
	queued int    // bytes in queue
	cursor uint64 // seq reached once everything in queue is written
	resync string // non-empty: the queue was dropped for this reason
	closed bool
	dirty  bool          // queued items since the last Take (feed.dirty bookkeeping)
	signal chan struct{} // capacity 1: "there is something to take"
	once   sync.Once

	ctl atomic.Uint32 // ctl* bits raised for the writer (raise)
}

// Control bits for the writer, raised by timers (Server.pump).
const (
	ctlHeartbeat uint32 = 1 << iota
	ctlLifetime
	ctlExpired // the stream's token expired
)

// raise sets a control bit and wakes the writer.
func (s *Subscriber) raise(bit uint32) {
	s.ctl.Or(bit)
	s.notify()
}

// Ready returns the channel that receives a value whenever Take or CatchUp
// has something to do.
func (s *Subscriber) Ready() <-chan struct{} { return s.signal }

// Variant returns the wire variant the subscriber receives.
func (s *Subscriber) Variant() Variant { return s.variant }

// Take appends everything queued to dst[:0] and returns it, with the cursor
// (seq) the client holds once it is written, and — when the queue was dropped
// — the reason, in which case the caller must call CatchUp before taking
// more. The returned byte slices are shared: the caller writes them and must
// not modify or retain them.
func (s *Subscriber) Take(dst []item) (items []item, cursor uint64, resync string) {
	s.mu.Lock()
	items, s.queue = s.queue, dst[:0]
	s.queued = 0
	s.dirty = false
	cursor, resync = s.cursor, s.resync
	s.mu.Unlock()
	return items, cursor, resync
}

// CatchUp brings a view-mode subscriber whose queue was dropped up to date
// with a snapshot (or from the ring when it still covers its position). An
// agui subscriber cannot be (runs.go): CatchUp returns ErrRunSplice and the
// caller ends the stream.
func (s *Subscriber) CatchUp(ctx context.Context) error {
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
func (s *Subscriber) Close() {
	s.once.Do(func() {
		f := s.feed
		f.mu.Lock()
		delete(f.subs, s)
		f.mu.Unlock()
		s.mu.Lock()
		s.closed = true
		s.queue, s.queued = nil, 0
		s.mu.Unlock()
		f.hub.m.Subscribers.WithLabelValues(s.variant.String()).Dec()
		f.hub.release(f)
	})
}

// enqueue appends msgs (all of one frame or snapshot) to the queue. Called
// with feed.mu held. Past the byte limit the whole queue is dropped and the
// subscriber flagged for resync. The limit bounds the backlog of frames: a
// snapshot (force) skips it and does not count against it, so that a view
// larger than the limit is delivered and the frames that follow it while
// it is being written are not dropped for its size; and a frame is always
// taken into an empty backlog, so that a frame larger than the limit (one
// large event) reaches a subscriber that keeps up.
func (s *Subscriber) enqueue(msgs [][]byte, seq uint64, ts int64, force bool) {
	n := 0
	for _, b := range msgs {
		n += len(b)
	}
	s.mu.Lock()
	if s.closed || s.resync != "" {
		s.mu.Unlock()
		return
	}
	if !force && s.queued > 0 && s.queued+n > s.limit {
		s.mu.Unlock()
		s.dropLocked(ReasonOverflow)
		s.feed.hub.m.Drops.WithLabelValues(ReasonOverflow).Inc()
		return
	}
	for _, b := range msgs {
		if len(b) > 0 {
			s.queue = append(s.queue, item{b: b, ts: ts})
		}
	}
	if !force {
		s.queued += n
	}
	s.cursor = seq
	wake := !s.dirty
	s.dirty = true
	s.mu.Unlock()
	switch {
	case !s.feed.holding:
		s.notify()
	case wake:
		s.feed.dirty = append(s.feed.dirty, s)
	}
	if n > 0 {
		s.feed.hub.m.delivered[s.variant].Add(float64(len(msgs)))
	}
}

// dropLocked drops the queue and flags a resync (feed.mu held).
func (s *Subscriber) dropLocked(reason string) {
	s.state = stResync
	s.mu.Lock()
	clear(s.queue)
	s.queue, s.queued = s.queue[:0], 0
	s.resync = reason
	s.mu.Unlock()
	s.notify()
}

func (s *Subscriber) notify() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// catchUp brings s live: from the ring when after (a client's cursor) is a
// position the feed still has, else with the feed's latest snapshot when the
// ring continues from it, else with a new snapshot request (shared with
// every subscriber of the thread that needs one at the same time). Each
// attempt is bounded; a snapshot the feed cannot continue from (older than
// the ring) is retried a few times before giving up with ErrCatchUp.
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
// (Hub.storedSeq, one request): one past the thread's last stored event was
// never real, and the snapshot is sent at once, with no retry.
func (s *Subscriber) catchUp(ctx context.Context, after Cursor, reason string) error {
	f := s.feed
	h := f.hub
	var waitUntil, behindUntil time.Time
	backoff := snapBackoffMin
	// checked: the stream was asked about the client's cursor; bogus: it
	// holds nothing that far, so the cursor raises no floor.
	checked, bogus := false, false
	for attempt := 0; attempt < 4; {
		f.mu.Lock()
		s.mu.Lock()
		clear(s.queue)
		s.queue, s.queued, s.resync = s.queue[:0], 0, ""
		s.mu.Unlock()
		if after.Valid && f.resumeLocked(s, after) {
			f.mu.Unlock()
			h.m.Resyncs.WithLabelValues(ReasonResume).Inc()
			return nil
		}
		floor := s.last
		if after.Valid && after.Index < 0 && after.Seq > floor && !bogus {
			floor = after.Seq
		}
		var waitCh chan struct{}
		behind := false
		if sn := f.cachedLocked(s.window); sn != nil && sn.seq < floor && (behindUntil.IsZero() || time.Now().Before(behindUntil)) {
			behind = true
		} else if sn := f.cachedLocked(s.window); sn != nil {
			switch f.fitLocked(sn.seq) {
			case fitOK:
				enc, ok := snapshotFor(s, sn, reason == ReasonJoin)
				if !ok {
					f.mu.Unlock()
					return ErrRunSplice
				}
				s.last, s.state = sn.seq, stLive
				s.enqueue(enc, sn.seq, 0, true)
				f.replayLocked(s, sn.seq)
				f.mu.Unlock()
				h.m.Resyncs.WithLabelValues(reason).Inc()
				return nil
			case fitFuture:
				// Frames up to the snapshot are in flight: wait for them a
				// little, then adopt the snapshot as the position (which
				// resynchronises the live subscribers behind it).
				if waitUntil.IsZero() {
					waitUntil = time.Now().Add(h.cfg.JoinWait)
				}
				if time.Now().Before(waitUntil) {
					if f.advanced == nil {
						f.advanced = make(chan struct{})
					}
					waitCh = f.advanced
				} else {
					f.adoptLocked(sn.seq)
					f.mu.Unlock()
					continue
				}
			}
		}
		f.mu.Unlock()
		if waitCh != nil {
			t := time.NewTimer(time.Until(waitUntil))
			select {
			case <-waitCh:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			t.Stop()
			continue
		}
		if behind && !checked && after.Valid && after.Seq > s.last {
			// Only the client vouches for its cursor. The stream says
			// whether it is real: past the thread's last stored event it
			// never was, and the snapshot is the answer, now (a fresh
			// start). If the stream cannot say, the cursor is waited for
			// as one the owner is replaying to.
			checked = true
			if last, err := h.storedSeq(ctx, f.key.tenant, f.key.token); err == nil && last < after.Seq {
				bogus = true
				h.m.BogusCursors.Inc()
				continue
			}
		}
		if behind {
			if behindUntil.IsZero() {
				behindUntil = time.Now().Add(h.cfg.SnapshotRetry)
			}
			h.m.SnapshotRetries.WithLabelValues(RetryBehind).Inc()
			t := time.NewTimer(rand.N(backoff) + time.Millisecond)
			select {
			case <-t.C:
			case <-h.closing:
				t.Stop()
				return ErrHubClosed
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			backoff = min(2*backoff, snapBackoffMax)
			if _, err := f.requestSnapshot(ctx, s.window); err != nil {
				return err
			}
			continue // not an attempt: the owner is catching up
		}
		if _, err := f.requestSnapshot(ctx, s.window); err != nil {
			return err
		}
		attempt++
	}
	return ErrCatchUp
}

// resumeLocked continues s from the client's cursor when the feed has it.
func (f *feed) resumeLocked(s *Subscriber, after Cursor) bool {
	if after.Index >= 0 {
		if s.variant != AguiSSE {
			return false
		}
		fr := f.ring.find(after.Seq)
		if fr == nil || after.Index >= len(fr.events) {
			return false
		}
		s.last, s.state = fr.seq, stLive
		if st := runOf(fr.events[:after.Index+1]); st.changed { // what the client saw of this frame
			s.run = st.open
		}
		s.enqueue(encodePartial(fr, s.variant, after.Index), fr.seq, fr.eventTS, true)
		f.replayLocked(s, fr.seq)
		return true
	}
	if f.fitLocked(after.Seq) != fitOK {
		return false
	}
	s.last, s.state = after.Seq, stLive
	s.mu.Lock()
	s.cursor = after.Seq
	s.mu.Unlock()
	f.replayLocked(s, after.Seq)
	return true
}
