package fanout

import (
	"context"
	"sync"
	"time"
)

// Frames travel on core NATS: one lost in flight is noticed by the next
// frame's Tc-Prev — but a thread that goes idle after the lost frame (a run
// that finished while the connection was down) has no next frame, and its
// subscribers would keep the stale view, or wait for a run end that never
// comes, silently. So after every reconnect, and when a feed's subscription
// dropped messages (slow consumer), the hub asks the pipeline where each
// affected thread is (a snapshot request) and resynchronises the subscribers
// of a feed that is behind, as it does on a gap.

// reconcileParallel bounds the snapshot requests one Reconcile has in flight.
const reconcileParallel = 8

// Reconcile checks every feed against the pipeline and resynchronises the
// subscribers of those that missed frames; it returns how many feeds were
// behind. It blocks until every check is done (each bounded by
// SnapshotTimeout; the goroutines it starts have returned when it returns)
// and stops starting checks when ctx ends. Server.Run calls it after NATS
// reconnects.
func (h *hub) Reconcile(ctx context.Context) int { return h.reconcile(ctx, true) }

// reconcile checks every feed (all) or only those whose subscription
// dropped messages since the last check, or whose last check could not
// reach the pipeline (suspect).
func (h *hub) reconcile(ctx context.Context, all bool) int {
	var feeds []*feed
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		for _, f := range sh.feeds {
			select {
			case <-f.ready:
			default:
				continue // still starting: its joiner's snapshot decides
			}
			if f.err != nil || f.sub == nil {
				continue
			}
			if !all && !f.suspect.Load() {
				n, err := f.sub.Dropped()
				if err != nil || int64(n) == f.dropSeen.Swap(int64(n)) {
					continue
				}
			}
			feeds = append(feeds, f)
		}
		sh.mu.Unlock()
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		behind int
	)
	sem := make(chan struct{}, reconcileParallel)
	for _, f := range feeds {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if f.reconcile(ctx) {
				mu.Lock()
				behind++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return behind
}

// reconcile requests a snapshot of the feed's thread and, when it is newer
// than the feed and the frames up to it do not arrive within JoinWait (they
// may be in flight), makes it the feed's position (adoptLocked, which
// resynchronises every live subscriber, ReasonGap). It reports whether the feed was behind.
func (f *feed) reconcile(ctx context.Context) bool {
	f.mu.Lock()
	known := f.known
	f.mu.Unlock()
	if !known { // no frame and no snapshot yet: nothing delivered to be stale
		return false
	}
	// The reply itself, not f.snap: a trimmed lingering feed does not
	// cache it.
	sn, err := f.requestSnapshot(ctx, 0)
	if err != nil {
		f.suspect.Store(true) // unknown yet: the next check retries it
		return false
	}
	f.suspect.Store(false)
	deadline := time.Now().Add(f.hub.cfg.JoinWait)
	for {
		f.mu.Lock()
		if sn.seq <= f.hi {
			f.mu.Unlock()
			return false
		}
		if !time.Now().Before(deadline) {
			f.adoptLocked(sn) // resynchronises every live subscriber: all are behind it
			f.mu.Unlock()
			return true
		}
		if f.advanced == nil {
			f.advanced = make(chan struct{})
		}
		wait := f.advanced
		f.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wait:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		t.Stop()
	}
}
