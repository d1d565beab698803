package fanout

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/wire"
)

// newIdleHub returns a hub on a real NATS connection whose feeds linger
// for an hour (only the idle bounds, Sweep and Close end them here).
func newIdleHub(t testing.TB, perTenant, total int) (*hub, *nats.Conn) {
	t.Helper()
	nc := connect(t, startNATS(t))
	cfg := DefaultHubConfig()
	cfg.Linger = time.Hour
	cfg.MaxIdleFeedsPerTenant, cfg.MaxIdleFeeds = perTenant, total
	h := newHub(nc, cfg, nil, nil)
	t.Cleanup(h.Close)
	return h, nc
}

// lookup returns the hub's feed of tenant's thread, or nil.
func (h *hub) lookup(tenant, thread string) *feed {
	k := feedKey{tenant: tenant, token: wire.EncodeThread(thread)}
	sh := h.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.feeds[k]
}

// visit subscribes to and leaves each thread of tenant in turn, leaving
// each one lingering.
func visit(t testing.TB, h *hub, tenant string, threads ...string) {
	t.Helper()
	for _, id := range threads {
		f, err := h.acquire(context.Background(), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		h.release(f)
	}
}

// checkIdle verifies the idle lists against the shards' maps and the
// gauges, and returns the lingering feeds' count per tenant. The hub must
// be quiescent.
func checkIdle(t testing.TB, h *hub) map[string]int {
	t.Helper()
	feeds, idle := 0, map[string]int{}
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		for _, f := range sh.feeds {
			feeds++
			if f.refs == 0 {
				idle[f.key.tenant]++
				if !h.idle.linked(f) {
					t.Errorf("lingering feed %v is not in the idle lists", f.key)
				}
			} else if h.idle.linked(f) {
				t.Errorf("active feed %v is in the idle lists", f.key)
			}
		}
		sh.mu.Unlock()
	}
	s := &h.idle
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for f := s.all.head; f != nil; f = f.idle.all.next {
		n++
	}
	sum := 0
	for tenant, tl := range s.tenants {
		m := 0
		for f := tl.head; f != nil; f = f.idle.tenant.next {
			m++
		}
		if m != tl.n || m != idle[tenant] || m == 0 || m > s.perTenant {
			t.Errorf("tenant %s: list of %d, counted %d, lingering %d, bound %d", tenant, m, tl.n, idle[tenant], s.perTenant)
		}
		sum += m
	}
	if n != s.all.n || n != sum || n > s.total {
		t.Errorf("idle list of %d, counted %d, tenants' sum %d, bound %d", n, s.all.n, sum, s.total)
	}
	if g := counterValue(h.m.Feeds); g != float64(feeds) {
		t.Errorf("feeds gauge %v, want %d", g, feeds)
	}
	if g := counterValue(h.m.IdleFeeds); g != float64(n) {
		t.Errorf("idle feeds gauge %v, want %d", g, n)
	}
	if got := h.nc.NumSubscriptions(); got != feeds {
		t.Errorf("%d NATS subscriptions, want one per feed: %d", got, feeds)
	}
	return idle
}

// checkNoFeeds checks that h holds no feed at all any more (when says at
// what point): nothing lingering, the feeds gauge at zero and no NATS
// subscription left on nc.
func checkNoFeeds(t testing.TB, h *hub, nc *nats.Conn, when string) {
	t.Helper()
	if idle := checkIdle(t, h); len(idle) != 0 {
		t.Fatalf("lingering %s: %v", when, idle)
	}
	if g := counterValue(h.m.Feeds); g != 0 {
		t.Fatalf("feeds gauge %v %s", g, when)
	}
	if n := nc.NumSubscriptions(); n != 0 {
		t.Fatalf("%d NATS subscriptions %s", n, when)
	}
}

// A tenant over its bound ends its own oldest lingering feeds, not another
// tenant's, and not its active ones.
func TestIdleBoundPerTenant(t *testing.T) {
	h, _ := newIdleHub(t, 3, 100)
	visit(t, h, "globex", "g0", "g1")
	active, err := h.acquire(context.Background(), "acme", "busy")
	if err != nil {
		t.Fatal(err)
	}
	visit(t, h, "acme", "a0", "a1", "a2", "a3", "a4", "a5")

	for _, tt := range []struct {
		tenant, thread string
		wantLive       bool
	}{
		{"globex", "g0", true}, {"globex", "g1", true}, {"acme", "busy", true},
		{"acme", "a0", false}, {"acme", "a1", false}, {"acme", "a2", false},
		{"acme", "a3", true}, {"acme", "a4", true}, {"acme", "a5", true},
	} {
		if got := h.lookup(tt.tenant, tt.thread) != nil; got != tt.wantLive {
			t.Errorf("%s/%s: feed present = %v, want %v", tt.tenant, tt.thread, got, tt.wantLive)
		}
	}
	if got := counterValue(h.m.IdleEnded.WithLabelValues(BoundTenant)); got != 3 {
		t.Errorf("ended by the tenant bound: %v, want 3", got)
	}
	if got := counterValue(h.m.IdleEnded.WithLabelValues(BoundTotal)); got != 0 {
		t.Errorf("ended by the total bound: %v, want 0", got)
	}
	if idle := checkIdle(t, h); idle["acme"] != 3 || idle["globex"] != 2 {
		t.Errorf("lingering per tenant: %v", idle)
	}
	h.release(active)
	// busy is now acme's newest lingering feed: a3 makes room for it.
	if h.lookup("acme", "busy") == nil || h.lookup("acme", "a3") != nil {
		t.Error("releasing the active feed did not push out acme's oldest lingering one")
	}
	checkIdle(t, h)
}

// Over the total bound the oldest lingering feed of any tenant ends.
func TestIdleBoundTotal(t *testing.T) {
	h, _ := newIdleHub(t, 10, 4)
	for i := range 6 {
		visit(t, h, fmt.Sprintf("t%d", i), "x")
	}
	for i := range 6 {
		if got, want := h.lookup(fmt.Sprintf("t%d", i), "x") != nil, i >= 2; got != want {
			t.Errorf("t%d: feed present = %v, want %v", i, got, want)
		}
	}
	if got := counterValue(h.m.IdleEnded.WithLabelValues(BoundTotal)); got != 2 {
		t.Errorf("ended by the total bound: %v, want 2", got)
	}
	checkIdle(t, h)
}

// A lingering feed subscribed to again is the same feed (its ring serves
// the resume), active, out of the idle count, and lingers again as the
// newest when left.
func TestIdleReacquire(t *testing.T) {
	h, _ := newIdleHub(t, 2, 100)
	visit(t, h, "acme", "a0", "a1")
	before := h.lookup("acme", "a0")
	f, err := h.acquire(context.Background(), "acme", "a0")
	if err != nil {
		t.Fatal(err)
	}
	if f != before {
		t.Fatal("re-acquiring a lingering feed made a new one")
	}
	if idle := checkIdle(t, h); idle["acme"] != 1 {
		t.Fatalf("lingering after re-acquire: %v, want acme:1", idle)
	}
	visit(t, h, "acme", "a2", "a3") // a1 is pushed out; a0 is active
	if h.lookup("acme", "a1") != nil || h.lookup("acme", "a0") != f {
		t.Fatal("the bound ended the wrong feed")
	}
	h.release(f) // a0 lingers again, newest: a2 goes
	if h.lookup("acme", "a2") != nil || h.lookup("acme", "a0") != f || h.lookup("acme", "a3") == nil {
		t.Fatal("a0 did not linger again as the newest")
	}
	if got := counterValue(h.m.IdleEnded.WithLabelValues(BoundTenant)); got != 2 {
		t.Errorf("ended by the tenant bound: %v, want 2", got)
	}
	checkIdle(t, h)
}

// Sweep and Close take feeds out of the idle lists: the gauges return to
// zero and every NATS subscription is gone.
func TestIdleSweepAndClose(t *testing.T) {
	h, nc := newIdleHub(t, 3, 5)
	visit(t, h, "acme", "a0", "a1", "a2", "a3")
	visit(t, h, "globex", "g0", "g1")
	checkIdle(t, h)
	if n := h.Sweep(time.Now().Add(2 * time.Hour)); n != 5 {
		t.Fatalf("Sweep ended %d, want 5", n)
	}
	if idle := checkIdle(t, h); len(idle) != 0 {
		t.Fatalf("lingering after Sweep: %v", idle)
	}
	visit(t, h, "acme", "a0", "a1")
	f, err := h.acquire(context.Background(), "globex", "g0")
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	h.release(f) // after Close: gone from its shard, must not linger
	checkNoFeeds(t, h, nc, "after Close")
}

// Subscribers of several tenants come and go at once, re-acquiring
// lingering feeds and being pushed out, while Sweep runs: under -race, and
// with the counts consistent at the end.
func TestIdleBoundConcurrent(t *testing.T) {
	h, nc := newIdleHub(t, 5, 12)
	tenants := []string{"acme", "globex", "initech", "umbrella"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Linger is an hour: this sweeps nothing but takes the locks.
			h.Sweep(time.Now())
			time.Sleep(time.Millisecond)
		}
	}()
	var workers sync.WaitGroup
	for w := range 8 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			var held []*feed
			for range 300 {
				// Few threads per tenant, so re-acquiring lingering
				// feeds (and racing their push-out) is common.
				tenant := tenants[r.IntN(len(tenants))]
				f, err := h.acquire(context.Background(), tenant, fmt.Sprint(r.IntN(10)))
				if err != nil {
					t.Error(err)
					return
				}
				held = append(held, f)
				for len(held) > 0 && (len(held) > 3 || r.IntN(2) == 0) {
					i := r.IntN(len(held))
					h.release(held[i])
					held = append(held[:i], held[i+1:]...)
				}
			}
			for _, f := range held {
				h.release(f)
			}
		}()
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	idle := checkIdle(t, h)
	n := 0
	for _, c := range idle {
		n += c
	}
	if n == 0 || n > 12 {
		t.Fatalf("%d lingering after everyone left, want 1..12", n)
	}
	if ended := counterValue(h.m.IdleEnded.WithLabelValues(BoundTenant)) + counterValue(h.m.IdleEnded.WithLabelValues(BoundTotal)); ended == 0 {
		t.Fatal("the bounds never ended a feed")
	}
	h.Sweep(time.Now().Add(2 * time.Hour))
	checkNoFeeds(t, h, nc, "after the final Sweep")
}

// endIdle ends a pushed-out feed only if it is still the same lingering
// feed once the locks are retaken: not re-acquired meanwhile, not lingering
// again (a new idle period), not already swept.
func TestEndIdleSkipsChangedFeed(t *testing.T) {
	h, _ := newIdleHub(t, 5, 5)
	visit(t, h, "acme", "a0")
	v := h.lookup("acme", "a0")
	h.idle.remove(v) // as idleSet.add does when it picks v

	f, err := h.acquire(context.Background(), "acme", "a0") // re-acquired in the window
	if err != nil {
		t.Fatal(err)
	}
	h.endIdle(v, BoundTenant)
	if h.lookup("acme", "a0") != v {
		t.Fatal("endIdle ended an active feed")
	}
	h.release(f) // lingering again: a new idle period
	h.endIdle(v, BoundTenant)
	if h.lookup("acme", "a0") != v {
		t.Fatal("endIdle ended a feed that lingers again")
	}
	checkIdle(t, h)

	h.idle.remove(v)
	if n := h.Sweep(time.Now().Add(2 * time.Hour)); n != 1 {
		t.Fatalf("Sweep ended %d, want 1", n)
	}
	h.endIdle(v, BoundTenant) // already swept: no second end
	if got := counterValue(h.m.IdleEnded.WithLabelValues(BoundTenant)); got != 0 {
		t.Fatalf("counted %v ended by the bound, want 0", got)
	}
	checkIdle(t, h)

	visit(t, h, "acme", "a1")
	v = h.lookup("acme", "a1")
	h.idle.remove(v)
	h.endIdle(v, BoundTenant) // still the same lingering feed: ends
	if h.lookup("acme", "a1") != nil || counterValue(h.m.IdleEnded.WithLabelValues(BoundTenant)) != 1 {
		t.Fatal("endIdle did not end the feed it was given")
	}
	checkIdle(t, h)
}

// Through the server: a client resuming on a thread still lingering
// continues from the ring; one whose thread the tenant bound pushed out
// gets a snapshot instead (never a gap).
func TestIdleBoundResume(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	pub := connect(t, ns)
	th1 := newTestThread(t, pub, "acme", "r1")
	th2 := newTestThread(t, pub, "acme", "r2")
	s, hs := newServer(t, nc, func(c *Config) { c.Hub.MaxIdleFeedsPerTenant = 1 })
	tok := token(t, "acme")
	cursors := map[*testThread]string{}
	for _, th := range []*testThread{th1, th2} {
		th.publish(t, th.id+"a;")
		c := openSSE(t, hs.URL+"/v1/threads/"+th.id+"/events", tok, nil)
		var a aguiModel
		a.follow(t, c, th.Text, 5*time.Second)
		cursors[th] = c.lastID
		c.close()
		// The handler leaves (and the feed starts lingering) after the
		// client hung up, in its own time.
		testsupport.WaitFor(t, 5*time.Second, th.id+" lingering", func() bool { return counterValue(s.m.IdleFeeds) == 1 && counterValue(s.m.Feeds) == 1 })
	}
	if got := counterValue(s.m.IdleEnded.WithLabelValues(BoundTenant)); got != 1 {
		t.Fatalf("ended by the tenant bound: %v, want 1", got)
	}
	for _, tt := range []struct {
		th        *testThread
		wantSnaps int
	}{
		{th2, 0}, // lingering: from the ring
		{th1, 1}, // pushed out: a snapshot
	} {
		tt.th.publish(t, tt.th.id+"b;")
		// The frame has passed before the client resumes: a feed made
		// anew for it cannot have it, and must start from a snapshot
		// (unflushed, the frame could reach the new feed's subscription
		// and continue the client's cursor, which needs none).
		if err := pub.Flush(); err != nil {
			t.Fatal(err)
		}
		c := openSSE(t, hs.URL+"/v1/threads/"+tt.th.id+"/events", tok, http.Header{"Last-Event-Id": {cursors[tt.th]}})
		a := aguiModel{text: tt.th.id + "a;"}
		a.follow(t, c, tt.th.Text, 5*time.Second)
		if a.snapshots != tt.wantSnaps {
			t.Errorf("%s: resumed with %d snapshots, want %d", tt.th.id, a.snapshots, tt.wantSnaps)
		}
		c.close()
	}
}

// TestIdleRingTrimmed: a lingering thread keeps its whole ring for
// IdleTrimAfter, so a client that dropped resumes from it however far
// behind it was; after that Sweep cuts the ring to IdleRingBytes (and it
// stays within them while frames keep coming) and lets go of the cached
// snapshot and encodings. A resume inside what was kept continues from the
// ring; one from before it gets a snapshot; both end with the exact text;
// a feed active again may grow its ring past the idle bound.
func TestIdleRingTrimmed(t *testing.T) {
	const idleBytes = 3000
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "busy")
	th.pad = `,"rawEvent":"` + strings.Repeat("p", 400) + `"` // frames of about 680 bytes
	s, hs := newServer(t, nc, func(c *Config) {
		c.Hub.Linger = time.Hour
		c.Hub.IdleRingBytes = idleBytes
		c.Hub.IdleTrimAfter = time.Minute // only the test's own Sweeps trim
	})
	tok := token(t, "acme")
	url := hs.URL + "/v1/threads/busy/events"
	f := func() *feed { return s.hub.lookup("acme", "busy") }
	lingering := func() {
		t.Helper()
		testsupport.WaitFor(t, 5*time.Second, "the feed lingering", func() bool { return counterValue(s.m.IdleFeeds) == 1 })
	}
	state := func() (n, bytes, encoded int, snap bool) {
		fd := f()
		fd.mu.Lock()
		defer fd.mu.Unlock()
		fd.ring.each(func(fr *frame) {
			for _, e := range fr.enc {
				if e != nil {
					encoded++
				}
			}
		})
		return fd.ring.n, fd.ring.bytes, encoded, fd.snap != nil
	}
	resume := func(cursor, had string) (snapshots int) {
		t.Helper()
		c := openSSE(t, url, tok, http.Header{"Last-Event-Id": {cursor}})
		a := aguiModel{text: had}
		a.follow(t, c, th.Text, 5*time.Second)
		c.close()
		lingering()
		return a.snapshots
	}

	th.publish(t, "f1;")
	c := openSSE(t, url, tok, nil)
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	old := c.lastID // after frame 1
	for i := 2; i <= 12; i++ {
		th.publish(t, fmt.Sprintf("f%d;", i))
	}
	a.follow(t, c, th.Text, 5*time.Second)
	recent := c.lastID // after frame 12
	c.close()
	lingering()
	if _, bytes, _, snap := state(); bytes <= 2*idleBytes || !snap {
		t.Fatalf("lingering within IdleTrimAfter: ring of %d bytes (want the whole ring, over %d), snapshot cached %v", bytes, 2*idleBytes, snap)
	}
	// Within IdleTrimAfter a client far behind still resumes from the ring.
	if n := resume(old, "f1;"); n != 0 {
		t.Fatalf("resume within IdleTrimAfter from frame 1: %d snapshots, want 0", n)
	}
	s.hub.Sweep(time.Now()) // not idle long enough: nothing cut
	if _, bytes, _, _ := state(); bytes <= 2*idleBytes {
		t.Fatalf("a Sweep before IdleTrimAfter cut the ring to %d bytes", bytes)
	}
	s.hub.Sweep(time.Now().Add(2 * time.Minute))
	checkTrimmed := func(when string) {
		t.Helper()
		if n, bytes, encoded, snap := state(); bytes > idleBytes || n == 0 || encoded != 0 || snap {
			t.Fatalf("lingering feed %s: ring of %d frames, %d bytes (bound %d), %d encodings kept, snapshot cached %v",
				when, n, bytes, idleBytes, encoded, snap)
		}
	}
	checkTrimmed("after IdleTrimAfter")
	th.publish(t, "f13;")
	last := th.publish(t, "f14;")
	testsupport.WaitFor(t, 5*time.Second, "frames reaching the lingering feed", func() bool {
		fd := f()
		fd.mu.Lock()
		defer fd.mu.Unlock()
		return fd.hi == last
	})
	checkTrimmed("after more frames")

	if n := resume(recent, "f1;f2;f3;f4;f5;f6;f7;f8;f9;f10;f11;f12;"); n != 0 {
		t.Errorf("resume inside the kept ring: %d snapshots, want 0", n)
	}
	// Active again, then back to lingering: the ring grew past the idle
	// bound while a subscriber was there, and is whole until the next cut.
	c = openSSE(t, url, tok, nil)
	var b aguiModel
	b.follow(t, c, th.Text, 5*time.Second)
	for i := 15; i <= 22; i++ {
		th.publish(t, fmt.Sprintf("f%d;", i))
	}
	b.follow(t, c, th.Text, 5*time.Second)
	c.close()
	lingering()
	if _, bytes, _, _ := state(); bytes <= idleBytes {
		t.Errorf("re-acquired feed: ring of %d bytes, still within the idle bound %d", bytes, idleBytes)
	}
	s.hub.Sweep(time.Now().Add(2 * time.Minute))
	checkTrimmed("cut again")
	if n := resume(old, "f1;"); n != 1 {
		t.Errorf("resume from before the kept ring: %d snapshots, want 1", n)
	}
}

// TestIdleRingBytesConfig: zero or negative means the default, and a
// lingering ring is never allowed more than an active one.
func TestIdleRingBytesConfig(t *testing.T) {
	nc := connect(t, startNATS(t))
	d := DefaultHubConfig()
	for _, tt := range []struct {
		ring, idle, want int
		after, wantAfter time.Duration
	}{
		{0, 0, d.IdleRingBytes, 0, d.IdleTrimAfter},
		{0, -5, d.IdleRingBytes, -time.Second, 0},
		{0, 1000, 1000, time.Second, time.Second},
		{4000, 9000, 4000, 0, d.IdleTrimAfter},
		{100, 0, 100, 0, d.IdleTrimAfter},
	} {
		cfg := DefaultHubConfig()
		cfg.RingBytes, cfg.IdleRingBytes, cfg.IdleTrimAfter = tt.ring, tt.idle, tt.after
		h := newHub(nc, cfg, nil, nil)
		if h.cfg.IdleRingBytes != tt.want || h.cfg.IdleTrimAfter != tt.wantAfter {
			t.Errorf("RingBytes %d, IdleRingBytes %d, IdleTrimAfter %v: got %d, %v; want %d, %v",
				tt.ring, tt.idle, tt.after, h.cfg.IdleRingBytes, h.cfg.IdleTrimAfter, tt.want, tt.wantAfter)
		}
		h.Close()
	}
}

// lingerAndTrim waits for the hub's only feed of thread to linger, then
// cuts it with a Sweep past IdleTrimAfter (tests set Linger to an hour).
func lingerAndTrim(t *testing.T, s *Server, thread string) *feed {
	t.Helper()
	testsupport.WaitFor(t, 5*time.Second, "the feed lingering", func() bool { return counterValue(s.m.IdleFeeds) == 1 })
	s.hub.Sweep(time.Now().Add(s.hub.cfg.IdleTrimAfter + time.Second))
	f := s.hub.lookup("acme", thread)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.trimmed.Load() || f.snap != nil {
		t.Fatalf("after a Sweep past IdleTrimAfter: trimmed %v, snapshot cached %v", f.trimmed.Load(), f.snap != nil)
	}
	return f
}

// TestReconcileLingeringFeed: a trimmed lingering feed whose subscription
// lost frames is repaired by Reconcile even when an older frame, still in
// flight, arrives while Reconcile waits for the frames up to the snapshot
// (such a feed caches no snapshot: Reconcile must judge by the reply it
// got, not by the cache).
func TestReconcileLingeringFeed(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	pub := connect(t, ns)
	th := newTestThread(t, pub, "acme", "quiet")
	s, hs := newServer(t, nc, func(c *Config) {
		c.Hub.Linger = time.Hour
		c.Hub.JoinWait = time.Second
	})
	th.publish(t, "a;") // seq 2
	c := openSSE(t, hs.URL+"/v1/threads/quiet/events", token(t, "acme"), nil)
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	c.close()
	f := lingerAndTrim(t, s, "quiet")
	// The pipeline is at 12; the feed saw 2. A frame 2 -> 4, delayed, is
	// delivered while Reconcile waits; the frames after it were lost.
	th.mu.Lock()
	th.seq = 12
	th.text.WriteString("b;c;")
	answered := th.snapshots
	th.mu.Unlock()
	done := make(chan int, 1)
	go func() { done <- s.hub.Reconcile(t.Context()) }()
	testsupport.WaitFor(t, 5*time.Second, "Reconcile holding its reply", func() bool {
		th.mu.Lock()
		n := th.snapshots
		th.mu.Unlock()
		f.mu.Lock()
		defer f.mu.Unlock()
		return n > answered && len(f.calls) == 0
	})
	late := &nats.Msg{Subject: wire.ViewSubject("acme", th.token), Header: nats.Header{
		wire.HeaderSeq: {"4"}, wire.HeaderPrev: {"2"}},
		Data: []byte(`{"tenant":"acme","thread":"quiet","seq":4,"prev":2,"status":"running","events":[` +
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"b;"}],"changes":{"append":"b;"}}`)}
	if err := pub.PublishMsg(late); err != nil {
		t.Fatal(err)
	}
	if n := <-done; n != 1 {
		t.Fatalf("Reconcile = %d, want 1 (the feed is behind the pipeline)", n)
	}
	f.mu.Lock()
	hi, cached := f.hi, f.snap != nil
	f.mu.Unlock()
	if hi != 12 || cached {
		t.Fatalf("feed at %d after Reconcile (want the pipeline's 12), snapshot cached %v (want none while trimmed)", hi, cached)
	}
}

// TestIdleRingEmptied: a frame larger than the idle bound that reaches a
// trimmed lingering feed is not kept either: the ring is empty, the feed's
// position is that frame's seq, and a client resuming from before it gets
// a snapshot and ends with the exact text.
func TestIdleRingEmptied(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "big")
	s, hs := newServer(t, nc, func(c *Config) {
		c.Hub.Linger = time.Hour
		c.Hub.IdleRingBytes = 1000
	})
	tok := token(t, "acme")
	url := hs.URL + "/v1/threads/big/events"
	th.publish(t, "a;")
	c := openSSE(t, url, tok, nil)
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	cursor := c.lastID
	c.close()
	f := lingerAndTrim(t, s, "big")
	last := th.publish(t, strings.Repeat("b", 2000)+";")
	testsupport.WaitFor(t, 5*time.Second, "the big frame reaching the feed", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.hi == last
	})
	f.mu.Lock()
	n, bytes, lo := f.ring.n, f.ring.bytes, f.lo
	f.mu.Unlock()
	if n != 0 || bytes != 0 || lo != last {
		t.Fatalf("after a frame over the idle bound: ring of %d frames, %d bytes, lo %d (want empty, lo = hi = %d)", n, bytes, lo, last)
	}
	c = openSSE(t, url, tok, http.Header{"Last-Event-Id": {cursor}})
	b := aguiModel{text: "a;"}
	b.follow(t, c, th.Text, 5*time.Second)
	if b.snapshots != 1 {
		t.Errorf("resume from before the emptied ring: %d snapshots, want 1", b.snapshots)
	}
	c.close()
}

// A hub closed while feeds are starting leaves no subscription behind:
// each starting feed's subscription is either found by Close or
// unsubscribed by the feed itself when it finds the hub closed (and the
// two never touch it at once: run with -race).
func TestCloseWhileFeedsStart(t *testing.T) {
	for round := range 20 {
		nc := connect(t, startNATS(t))
		h := newHub(nc, DefaultHubConfig(), nil, nil)
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				if f, err := h.acquire(context.Background(), "acme", fmt.Sprintf("t%d", i)); err == nil {
					h.release(f)
				}
			})
		}
		h.Close()
		wg.Wait()
		if n := nc.NumSubscriptions(); n != 0 {
			t.Fatalf("round %d: %d subscriptions left after Close", round, n)
		}
	}
}

// A feed started for a caller that has already left (its context
// cancelled) starts all the same: it is every acquirer's, and the others
// waiting for it must not get that caller's cancellation.
func TestAcquireOutlivesItsCreator(t *testing.T) {
	h, _ := newIdleHub(t, 10, 10)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	f, err := h.acquire(gone, "acme", "t1")
	if err != nil {
		t.Fatalf("a feed started for a cancelled caller: %v", err)
	}
	g, err := h.acquire(context.Background(), "acme", "t1")
	if err != nil || g != f {
		t.Fatalf("the next acquirer: %v (same feed: %v)", err, g == f)
	}
	h.release(f)
	h.release(g)
}
