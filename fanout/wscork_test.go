package fanout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
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
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	req := "GET /v1/threads/stall/events?access_token=" + token(t, "acme") + " HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
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
