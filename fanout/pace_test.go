package fanout

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/sockopt"
	"github.com/threadcast/threadcast/internal/testsupport"
)

// fakeWindow is a peerWindow whose unread bytes and slack the test sets.
type fakeWindow struct {
	n, slack int
	ok       bool
}

func (f *fakeWindow) unread() (int, int, bool) { return f.n, f.slack, f.ok }

// The pacer's decisions, step by step, on a clock the test moves.
func TestPacerDecisions(t *testing.T) {
	w := &fakeWindow{ok: true}
	now := time.Unix(1000, 0)
	p := &pacer{pw: w, limit: 8 << 10, timeout: time.Minute, now: func() time.Time { return now }}
	step := func(d time.Duration, unread int, want paceAction) {
		t.Helper()
		now = now.Add(d)
		w.n = unread
		if got := p.next(); got != want {
			t.Fatalf("at +%v with %d unread: action %d, want %d", now.Sub(time.Unix(1000, 0)), unread, got, want)
		}
	}
	// Below limit/2 bytes written, the window is not looked at.
	p.wrote(1 << 10)
	step(0, 100<<10, paceWrite)
	// Past it, a client with little unread is written to.
	p.wrote(4 << 10)
	step(0, 2<<10, paceWrite)
	// One with too much unread is held, and probed at once: its window may
	// be stale.
	p.wrote(4 << 10)
	step(0, 20<<10, paceProbeNow)
	step(paceTick, 20<<10, paceWait)
	// No reading seen: probes back off (100 ms, then 200 ms, ...).
	step(paceProbe, 20<<10, paceProbeNow)
	step(paceProbe, 20<<10, paceWait)
	step(paceProbe, 20<<10, paceProbeNow)
	// The client read some: the probe interval starts over.
	step(paceTick, 15<<10, paceWait)
	step(paceProbe-paceTick, 15<<10, paceProbeNow)
	// It read enough: written to again. Held for longer than quickRelease,
	// it is behind: what it takes is consolidated, its window is looked at
	// before every write, and it is held past limit/4 unread.
	step(paceTick, 4<<10, paceWrite)
	if !p.behind {
		t.Fatal("a client released from a long hold is not behind")
	}
	p.wrote(100)
	step(0, 1<<10, paceWrite)
	p.wrote(100)
	step(0, 3<<10, paceProbeNow)
	// A behind client within the limit whose window does not move is
	// written to once it has not moved for stillFor, and stays behind.
	step(paceTick, 3<<10, paceWait)
	step(stillFor-paceTick-time.Millisecond, 3<<10, paceProbeNow)
	step(time.Millisecond, 3<<10, paceWrite)
	if !p.behind {
		t.Fatal("a behind client let go after stillFor is no longer behind")
	}
	p.wrote(100)
	step(0, 3<<10, paceProbeNow)
	// Released at the first look after the probe: it keeps up again, and
	// its window is looked at only once limit/2 bytes were written.
	step(paceTick, 1<<10, paceWrite)
	if p.behind {
		t.Fatal("a client released within quickRelease is still behind")
	}
	p.wrote(100)
	step(0, 100<<10, paceWrite)
	// A client held at the normal mark and released as quickly is not
	// behind either.
	p.wrote(4 << 10)
	step(0, 20<<10, paceProbeNow)
	step(paceTick, 0, paceWrite)
	if p.behind {
		t.Fatal("a client released within quickRelease is behind")
	}
	// Held past the limit, but by no more than the window's rounding (a
	// segment, while the window is open): it may have read everything, so
	// it is written to once its window has not moved for stillFor.
	w.slack = 12 << 10
	p.wrote(8 << 10)
	step(0, 20<<10, paceProbeNow)
	step(stillFor, 20<<10, paceWrite)
	// Past limit + slack it is held however long its window stays still.
	p.wrote(100)
	step(0, 22<<10, paceProbeNow)
	step(3*stillFor, 22<<10, paceProbeNow)
	// Within it again, it is written to once its window has not moved
	// for twice as long as before (the wait counts from its last move)...
	step(0, 20<<10, paceWait)
	step(2*stillFor-time.Millisecond, 20<<10, paceProbeNow)
	step(time.Millisecond, 20<<10, paceWrite)
	// ... and so on, up to half the timeout.
	for wait := 4 * stillFor; wait <= p.timeout/2; wait *= 2 {
		p.wrote(100)
		step(0, 20<<10, paceProbeNow)
		step(wait-time.Millisecond, 20<<10, paceProbeNow)
		step(time.Millisecond, 20<<10, paceWrite)
	}
	p.wrote(100)
	step(0, 20<<10, paceProbeNow)
	step(p.timeout/2, 20<<10, paceWrite)
	// A client released within the limit (it read) starts over.
	p.wrote(100)
	step(0, 1<<10, paceWrite)
	p.wrote(100)
	step(0, 20<<10, paceProbeNow)
	step(stillFor, 20<<10, paceWrite)
	// With the window shut, nothing is rounding: held with no reading for
	// the timeout, it is cut.
	w.slack = 0
	p.wrote(8 << 10)
	step(0, 20<<10, paceProbeNow)
	step(time.Minute-time.Millisecond, 20<<10, paceProbeNow)
	step(time.Millisecond, 20<<10, paceCut)
	// A kernel that stops telling releases the hold.
	w.ok = false
	step(0, 0, paceWrite)
}

// startPacedServer is a server over real NATS and ingest whose
// connections reach the streams as Run serves them (so they are paced),
// with the kernel's own buffers, and unread as Config.UnreadBytes.
func startPacedServer(t *testing.T, unread int) (*Server, string, jetstream.JetStream) {
	t.Helper()
	return startIngestServer(t, func(cfg *Config) { cfg.UnreadBytes = unread },
		func(hs *httptest.Server) { hs.Config.ConnContext = withConn })
}

// A reader that falls behind gets its backlog consolidated, although its
// kernel would have taken it event by event: the writer holds back once
// the client has more than UnreadBytes unread, and the backlog gathers in
// its queue. The reader stops reading while the thread streams (its
// receive buffer, 64 KiB, holds hundreds of these events), then reads to
// the end: it must reach the REST view having read few messages. Without
// pacing (UnreadBytes < 0) the same reader reads every event the kernels
// took before the queue passed the high-water mark.
func TestPacedReaderGetsConsolidated(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pacing reads the peer's window from Linux's TCP_INFO")
	}
	results := map[string]int{}
	for _, tc := range []struct {
		name   string
		unread int
	}{{"paced", 8 << 10}, {"unpaced", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			s, base, js := startPacedServer(t, tc.unread)
			const thread = "paced-thread"
			tok := token(t, "acme")
			evs := backpressureStream(thread, 4, 300)
			first := publishFirst(t, js, base, tok, thread, evs[0])

			fast := openReader(t, http.DefaultClient, base, tok, thread, false)
			slow := openReader(t, &http.Client{Transport: &http.Transport{DialContext: sockopt.RecvBufferDialer(32 << 10).DialContext}}, base, tok, thread, false)
			fast.name, slow.name = "fast", "slow"
			for _, r := range []*streamReader{fast, slow} {
				if err := r.readUntil(seqIs(first)); err != nil {
					t.Fatal(err)
				}
			}
			var target uint64
			var mu sync.Mutex
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fast.readUntil(func() uint64 { mu.Lock(); defer mu.Unlock(); return target }); err != nil {
					t.Error(err)
				}
			}()
			last := publishAll(t, js, thread, evs[1:], time.Millisecond)
			mu.Lock()
			target = last
			mu.Unlock()
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			testsupport.WaitFor(t, 10*time.Second, "REST view at the last event", func() bool { seq, _ := restView(t, base, tok, thread); return seq == last })
			_, want := restView(t, base, tok, thread)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			go func() { <-ctx.Done(); slow.body.Close() }()
			if err := slow.readUntil(seqIs(last)); err != nil {
				t.Fatal(err)
			}
			fast.checkView(t, want)
			slow.checkView(t, want)
			paced := counterValue(s.Metrics().Paced.WithLabelValues(AguiSSE.String()))
			t.Logf("%d events; messages read: fast %d, slow %d; holds %v", len(evs), fast.msgs, slow.msgs, paced)
			results[tc.name] = slow.msgs
			if tc.unread > 0 && paced == 0 {
				t.Errorf("the slow reader's writer never held back")
			}
		})
	}
	if p, u := results["paced"], results["unpaced"]; p == 0 || u == 0 || p*4 > u {
		t.Errorf("the slow reader read %d messages paced and %d unpaced: want at most a quarter", p, u)
	}
}

// A held client that reads nothing is cut after staleFactor × the write
// timeout (EndWrite), although no write ever blocks: holding back never
// fills its socket.
func TestPacedStalledClientIsCut(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pacing reads the peer's window from Linux's TCP_INFO")
	}
	s, base, js := startIngestServer(t, func(cfg *Config) { cfg.WriteTimeout = 200 * time.Millisecond },
		func(hs *httptest.Server) { hs.Config.ConnContext = withConn })
	const thread = "stalled-thread"
	tok := token(t, "acme")
	evs := backpressureStream(thread, 2, 200)
	first := publishFirst(t, js, base, tok, thread, evs[0])
	stalled := openReader(t, &http.Client{Transport: &http.Transport{DialContext: sockopt.RecvBufferDialer(4 << 10).DialContext}}, base, tok, thread, false)
	if err := stalled.readUntil(seqIs(first)); err != nil {
		t.Fatal(err)
	}
	publishAll(t, js, thread, evs[1:], 0) // the reader reads no more
	testsupport.WaitFor(t, 20*time.Second, "the stalled stream cut", func() bool {
		return counterValue(s.Metrics().Ended.WithLabelValues(EndWrite)) == 1
	})
	if n := counterValue(s.Metrics().Paced.WithLabelValues(AguiSSE.String())); n == 0 {
		t.Error("cut, but never held back: the write deadline cut it, not the pacer")
	}
}

// A client that keeps up, reading in small steps through a small receive
// buffer, is not held until it is cut: the window it announces once it
// has read everything may stay up to a segment below the largest it
// announced (a receiver keeps offering the window it offered while that
// is within a segment of its free space), which here is more than
// UnreadBytes. Its writer, held on that window, must let it go once the
// window has not moved for stillFor; held on, it would be cut at
// staleFactor × the write timeout while the thread is quiet.
func TestPacedDrainedClientIsNotCut(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pacing reads the peer's window from Linux's TCP_INFO")
	}
	s, base, js := startIngestServer(t, func(cfg *Config) {
		cfg.UnreadBytes = 512
		cfg.WriteTimeout = 200 * time.Millisecond
	}, func(hs *httptest.Server) { hs.Config.ConnContext = withConn })
	const thread = "drained-thread"
	tok := token(t, "acme")
	evs := backpressureStream(thread, 2, 200)
	first := publishFirst(t, js, base, tok, thread, evs[0])
	dial := sockopt.RecvBufferDialer(16 << 10)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return slowConn{c, 4 << 10, 40 * time.Millisecond}, nil
	}}}
	r := openReader(t, client, base, tok, thread, false)
	if err := r.readUntil(seqIs(first)); err != nil {
		t.Fatal(err)
	}
	var target atomic.Uint64
	done := make(chan error, 1)
	go func() { done <- r.readUntil(target.Load) }()
	publishAll(t, js, thread, evs[1:len(evs)-1], 2*time.Millisecond)
	// Quiet for longer than a held client may show no reading.
	time.Sleep(3 * staleFactor * 200 * time.Millisecond)
	target.Store(publishAll(t, js, thread, evs[len(evs)-1:], 0))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		r.body.Close()
		t.Fatal("the reader did not reach the last event")
	}
	if n := counterValue(s.Metrics().Ended.WithLabelValues(EndWrite)); n != 0 {
		t.Errorf("%v streams cut for writing, want 0", n)
	}
	t.Logf("holds %v", counterValue(s.Metrics().Paced.WithLabelValues(AguiSSE.String())))
}
