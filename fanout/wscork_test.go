package fanout

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/threadcast/threadcast/internal/testsupport"
)

// A burst of frames reaches a WebSocket client whole and in order, each
// event its own message, while the client pings the server all along: the
// pongs, written by the library's reader goroutine, never land inside a
// batch the writer has gathered.
func TestWebSocketBatchesWithPings(t *testing.T) {
	ns := startNATS(t)
	th := newTestThread(t, connect(t, ns), "acme", "burst")
	th.publish(t, "start;")
	_, hs := newServer(t, connect(t, ns), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/threads/burst/events?access_token="+token(t, "acme"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)

	var pings sync.WaitGroup
	pingCtx, stopPings := context.WithCancel(ctx)
	pings.Add(1)
	go func() {
		defer pings.Done()
		for pingCtx.Err() == nil {
			if err := c.Ping(pingCtx); err != nil && pingCtx.Err() == nil {
				t.Errorf("ping: %v", err)
				return
			}
		}
	}()

	// Events of mixed sizes, some larger than the cork buffer, so that
	// batches are written through as well as gathered.
	const frames = 400
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := 0; i < frames; i++ {
			chunk := fmt.Sprintf("%d;", i)
			if i%97 == 0 {
				chunk = strings.Repeat("L", 2*corkMax+i) + chunk
			}
			th.publish(t, chunk, fmt.Sprintf("+%d;", i))
		}
	}()
	var a aguiModel
	for done := false; !done || a.text != th.Text(); {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("after %d bytes of text: %v", len(a.text), err)
		}
		a.apply(t, string(data))
		// The thread's text only grows: what the client has is always a
		// prefix of it, or a message was lost, torn or reordered.
		if !strings.HasPrefix(th.Text(), a.text) {
			t.Fatalf("text diverged at %d bytes: %q", len(a.text), shorten(a.text[max(0, len(a.text)-40):]))
		}
		select {
		case <-published:
			done = true
		default:
		}
	}
	stopPings()
	pings.Wait()
	if a.snapshots != 1 {
		t.Fatalf("%d snapshots, want 1", a.snapshots)
	}
}

// A WebSocket client that reads nothing has its stream ended by the write
// deadline (WriteTimeout), although the messages are written without a
// context of their own.
func TestWebSocketStalledClientTimesOut(t *testing.T) {
	ns := startNATS(t)
	th := newTestThread(t, connect(t, ns), "acme", "stall")
	th.publish(t, "start;")
	srv, hs := newServer(t, connect(t, ns), func(c *Config) {
		c.WriteTimeout = 300 * time.Millisecond
		c.Hub.QueueBytes = 64 << 20 // the deadline, not the queue, must end it
	})
	// A raw client: the handshake, then never a read.
	dialRawWS(t, hs.URL, "stall", token(t, "acme"))
	testsupport.WaitFor(t, 10*time.Second, "the stalled client subscribed", func() bool {
		return counterValue(srv.m.Subscribers.WithLabelValues(AguiWS.String())) == 1
	})
	big := strings.Repeat("x", 256<<10)
	start := time.Now()
	for i := 0; counterValue(srv.m.Subscribers.WithLabelValues(AguiWS.String())) != 0; i++ {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the stalled stream is still open after %v (%d frames)", time.Since(start), i)
		}
		if i < 200 { // 50 MB: far more than loopback socket buffers hold
			th.publish(t, big)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := counterValue(srv.m.Drops.WithLabelValues(ReasonOverflow)); got != 0 {
		t.Fatalf("overflow drops = %v: the queue ended it, not the deadline", got)
	}
}

// A corked socket whose client reads slowly but steadily is never cut,
// though a write takes it many times the timeout; one whose client reads
// nothing is, after the timeout. net.Pipe has no buffer: a write returns
// when the other side has read it all.
func TestCorkConnDeadlineMovesWithProgress(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	cc := &corkConn{Conn: server, timeout: 300 * time.Millisecond}
	defer cc.Close()
	payload := []byte(strings.Repeat("z", 40<<10))
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 1<<10)
		n := 0
		for n < len(payload) {
			m, err := client.Read(buf)
			n += m
			if err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond) // about 50 KB/s: the write takes about 0.8 s
		}
		got <- n
	}()
	start := time.Now()
	cc.cork()
	if _, err := cc.Write(payload[:1<<10]); err != nil { // gathered
		t.Fatal(err)
	}
	if _, err := cc.Write(payload[1<<10:]); err != nil { // gathered too: uncork writes it all
		t.Fatal(err)
	}
	if err := cc.uncork(); err != nil {
		t.Fatalf("slow reader cut after %v: %v", time.Since(start), err)
	}
	if n := <-got; n != len(payload) {
		t.Fatalf("read %d of %d bytes", n, len(payload))
	}
	if d := time.Since(start); d < 2*cc.timeout {
		t.Logf("the write took only %v: it did not outlast the timeout", d)
	}

	// Nobody reads now: the next write fails after the timeout.
	start = time.Now()
	if _, err := cc.Write(payload); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a reader that reads nothing: %v, want a deadline error", err)
	}
	if d := time.Since(start); d < cc.timeout-cc.timeout/8 {
		t.Fatalf("gave up after %v, before the timeout", d)
	}
}

// slowConn reads at most chunk bytes per pause: a client that reads
// steadily and slowly.
type slowConn struct {
	net.Conn
	chunk int
	pause time.Duration
}

func (c slowConn) Read(p []byte) (int, error) {
	time.Sleep(c.pause)
	return c.Conn.Read(p[:min(len(p), c.chunk)])
}

// A WebSocket client that reads steadily but slowly, answering each ping
// when it reaches it behind what it has still to read, is not cut: its
// pongs come later than a ping is waited for (staleFactor × WriteTimeout),
// but the connection takes bytes all along, which a gone client's does
// not (TestWebSocketStalledClientTimesOut).
func TestWebSocketSlowReaderPongsLate(t *testing.T) {
	ns := startNATS(t)
	th := newTestThread(t, connect(t, ns), "acme", "late")
	th.publish(t, "start;")
	const writeTimeout = 50 * time.Millisecond // a ping waits 300 ms for its pong
	srv, hs := newServer(t, connect(t, ns), func(c *Config) {
		c.WriteTimeout = writeTimeout
		c.Heartbeat = 100 * time.Millisecond
	})
	raw := dialRawWS(t, hs.URL, "late", token(t, "acme"))
	// 16 KiB a second: the socket buffers' tens of kilobytes ahead of a
	// ping take seconds to read.
	br := bufio.NewReaderSize(slowConn{raw, 512, 30 * time.Millisecond}, 512)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	type result struct {
		pings int
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for {
			var h [2]byte
			if _, r.err = io.ReadFull(br, h[:]); r.err != nil {
				break
			}
			n := int(h[1] & 0x7f)
			switch n {
			case 126:
				var x [2]byte
				_, r.err = io.ReadFull(br, x[:])
				n = int(binary.BigEndian.Uint16(x[:]))
			case 127:
				var x [8]byte
				_, r.err = io.ReadFull(br, x[:])
				n = int(binary.BigEndian.Uint64(x[:]))
			}
			p := make([]byte, n)
			if r.err == nil {
				_, r.err = io.ReadFull(br, p)
			}
			if r.err != nil {
				break
			}
			switch op := h[0] & 0x0f; {
			case op == 0x9: // a masked pong (mask 0) with the ping's payload
				r.pings++
				_, r.err = raw.Write(append([]byte{0x8a, 0x80 | byte(n), 0, 0, 0, 0}, p...))
			case op == 0x8:
				r.err = fmt.Errorf("closed by the server: %q", p)
			case strings.Contains(string(p), "end;"):
				done <- r
				return
			}
			if r.err != nil {
				break
			}
		}
		done <- r
	}()
	testsupport.WaitFor(t, 10*time.Second, "the client subscribed", func() bool {
		return counterValue(srv.m.Subscribers.WithLabelValues(AguiWS.String())) == 1
	})
	// Frames keep coming for 3 s, so that pings go out between them and
	// wait behind what the client has still to read.
	chunk := strings.Repeat("y", 400)
	for range 300 {
		th.publish(t, chunk)
		time.Sleep(10 * time.Millisecond)
	}
	th.publish(t, "end;")
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("after %d pings: %v", r.pings, r.err)
		}
		if r.pings == 0 {
			t.Fatal("no ping reached the client: the test shows nothing")
		}
		t.Logf("%d pings answered", r.pings)
	case <-time.After(60 * time.Second):
		t.Fatal("the client did not read the last frame in 60 s")
	}
	if n := counterValue(srv.m.Ended.WithLabelValues(EndWrite)); n != 0 {
		t.Fatalf("%v streams ended with reason write", n)
	}
}

// dialRawWS opens a raw TCP connection with a 4 KiB receive buffer and
// sends a WebSocket handshake for thread's stream; it reads nothing. The
// connection is closed when the test ends.
func dialRawWS(t *testing.T, base, thread, tok string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	req := "GET /v1/threads/" + thread + "/events?access_token=" + tok + " HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A batch costs the socket one write, corked or not: a lone message the
// WebSocket library writes in one piece (up to wsDirectMax bytes) goes
// straight through without a buffer from the pool; a larger one, which
// the library writes in wsBufSize pieces, and a batch of several are
// gathered. Every message reaches the client whole and in order.
func TestCorkConnBatchWrites(t *testing.T) {
	msg := func(n int, c byte) []byte { return []byte(strings.Repeat(string(c), n)) }
	cases := []struct {
		name      string
		items     [][]byte
		wantCork  bool
		wantWrite int64
	}{
		{"one message of wsDirectMax bytes", [][]byte{msg(wsDirectMax, 'a')}, false, 1},
		{"one small message", [][]byte{msg(10, 'b')}, false, 1},
		{"one message a byte past wsDirectMax", [][]byte{msg(wsDirectMax+1, 'c')}, true, 1},
		// Uncorked, the library would write this in two pieces.
		{"one message of three buffers", [][]byte{msg(3*wsBufSize, 'g')}, true, 1},
		{"three messages", [][]byte{msg(10, 'd'), msg(wsDirectMax, 'e'), msg(3, 'f')}, true, 1},
	}
	type result struct {
		corked bool
		writes int64
		n      int
		err    error
	}
	results := make(chan result, len(cases))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cc := &corkConn{timeout: 5 * time.Second}
		c, err := websocket.Accept(corkWriter{w, cc}, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.CloseNow()
		ctx := c.CloseRead(context.Background())
		cc.mu.Lock()
		counted := &countingConn{Conn: cc.Conn}
		cc.Conn = counted
		cc.mu.Unlock()
		for _, tc := range cases {
			var items []item
			for _, b := range tc.items {
				items = append(items, item{b: b})
			}
			var res result
			before := counted.writes.Load()
			res.n, res.err = cc.batch(items, func(b []byte) error {
				res.corked = res.corked || cc.buf != nil
				return c.Write(context.Background(), websocket.MessageText, b)
			}, wsDirectMax)
			res.writes = counted.writes.Load() - before
			results <- res
		}
		<-ctx.Done()
	}))
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for _, tc := range cases {
		res := <-results
		want := 0
		for _, b := range tc.items {
			want += len(b)
			typ, got, err := c.Read(ctx)
			if err != nil || typ != websocket.MessageText || string(got) != string(b) {
				t.Fatalf("%s: read %v %d bytes (%v), want text %d bytes of %q", tc.name, typ, len(got), err, len(b), b[:1])
			}
		}
		if res.err != nil || res.n != want {
			t.Errorf("%s: batch returned %d, %v; want %d, nil", tc.name, res.n, res.err, want)
		}
		if res.corked != tc.wantCork || res.writes != tc.wantWrite {
			t.Errorf("%s: corked %v in %d socket writes, want corked %v in %d", tc.name, res.corked, res.writes, tc.wantCork, tc.wantWrite)
		}
	}
}

// discardConn takes every write whole and keeps nothing.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error)      { return len(p), nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkCorkBatchOne is the writer's cost of a batch of one 256-byte
// item (a light load's usual batch), corked (as a batch of several is)
// against written straight through, side by side; the socket is a
// discard, so what is left is the cork's: a pooled buffer, a copy, the
// lock taken twice more.
//
//	go test ./fanout -run '^$' -bench BenchmarkCorkBatchOne -count 5
func BenchmarkCorkBatchOne(b *testing.B) {
	items := []item{{b: []byte(strings.Repeat("x", 256))}}
	for _, bc := range []struct {
		name   string
		direct int
	}{{"corked", 0}, {"direct", math.MaxInt}} {
		b.Run(bc.name, func(b *testing.B) {
			cc := &corkConn{Conn: discardConn{}, timeout: time.Minute}
			put := func(p []byte) error { _, err := cc.Write(p); return err }
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cc.batch(items, put, bc.direct); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A corked batch takes its buffer from the pool and gives it back: once
// warm, a batch allocates nothing, whatever it gathered.
func TestCorkConnBatchReusesBuffer(t *testing.T) {
	cc := &corkConn{Conn: discardConn{}, timeout: time.Minute}
	put := func(p []byte) error { _, err := cc.Write(p); return err }
	items := []item{{b: []byte(strings.Repeat("x", 256))}, {b: []byte(strings.Repeat("y", 3000))}}
	for range 50_000 { // past the pool's calibration, after 42,000 buffers given back
		if _, err := cc.batch(items, put, 0); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(200, func() { _, _ = cc.batch(items, put, 0) }); a >= 1 {
		t.Fatalf("%.2f allocations per corked batch, want none", a)
	}
}
