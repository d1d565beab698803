package fanout

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/threadcast/threadcast/internal/testsupport"
)

func TestJoinThenLive(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "t1")
	th.publish(t, "a;", "b;")
	th.publish(t, "c;")
	_, hs := newServer(t, nc, nil)

	c := openSSE(t, hs.URL+"/v1/threads/t1/events", token(t, "acme"), nil)
	if got := c.resp.Header.Get("X-Accel-Buffering"); got != "no" {
		t.Errorf("X-Accel-Buffering = %q", got)
	}
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	if a.snapshots != 1 {
		t.Fatalf("snapshots = %d, want 1", a.snapshots)
	}
	if c.lastID != "5" {
		t.Fatalf("last id after snapshot = %q, want 5", c.lastID)
	}
	th.publish(t, "d;", "e;", "f;")
	a.follow(t, c, th.Text, 5*time.Second)
	if c.lastID != "9" || a.snapshots != 1 {
		t.Fatalf("last id %q snapshots %d, want 9 and 1", c.lastID, a.snapshots)
	}
}

// A thread published to by a busy agent while subscribers keep joining:
// every subscriber ends with exactly the publisher's text (no gap, no
// duplicate), and they share one snapshot request more often than not.
func TestJoinDuringBusyStreamNoGap(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "busy")
	_, hs := newServer(t, nc, nil)
	tok := token(t, "acme")

	stop := make(chan struct{})
	var pub sync.WaitGroup
	pub.Add(1)
	go func() {
		defer pub.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			chunks := make([]string, 1+i%3)
			for j := range chunks {
				chunks[j] = fmt.Sprintf("%d.%d;", i, j)
			}
			th.publish(t, chunks...)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	const n = 20
	clients := make([]*sseClient, n)
	models := make([]*aguiModel, n)
	for i := range clients {
		time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond)
		clients[i] = openSSE(t, hs.URL+"/v1/threads/busy/events", tok, nil)
		models[i] = &aguiModel{}
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	pub.Wait()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			models[i].follow(t, clients[i], th.Text, 10*time.Second)
		}()
	}
	wg.Wait()
	for i, m := range models {
		if m.snapshots != 1 {
			t.Errorf("client %d got %d snapshots, want 1 (a resync means a gap was detected)", i, m.snapshots)
		}
	}
}

func TestResumeFromRing(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "r1")
	_, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	th.publish(t, "a;")
	c := openSSE(t, hs.URL+"/v1/threads/r1/events", tok, nil)
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	th.publish(t, "b;", "c;", "d;")
	// Read only part of the 3-event frame, then drop the connection.
	for a.text != "a;b;c;" {
		m, err := c.next()
		if err != nil {
			t.Fatal(err)
		}
		if m.data != "" {
			a.apply(t, m.data)
		}
	}
	if c.lastID != "6.1" {
		t.Fatalf("id inside a frame = %q, want 6.1", c.lastID)
	}
	c.close()
	th.publish(t, "e;")
	th.publish(t, "f;", "g;")
	snapsBefore := th.snapshots

	tests := []struct {
		name, cursor string
		useQuery     bool
	}{
		{"partial frame via Last-Event-ID", "6.1", false},
		{"frame boundary via after", "6", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := hs.URL + "/v1/threads/r1/events"
			var hdr http.Header
			if tt.useQuery {
				url += "?after=" + tt.cursor
			} else {
				hdr = http.Header{"Last-Event-Id": {tt.cursor}}
			}
			c2 := openSSE(t, url, tok, hdr)
			b := aguiModel{text: "a;b;c;"}
			if tt.useQuery {
				b.text = "a;b;c;d;"
			}
			b.follow(t, c2, th.Text, 5*time.Second)
			if b.snapshots != 0 {
				t.Fatalf("resume sent %d snapshots, want 0", b.snapshots)
			}
		})
	}
	if th.snapshots != snapsBefore {
		t.Fatalf("resume asked the pipeline for %d snapshots", th.snapshots-snapsBefore)
	}
}

// Resuming on a node that never saw the thread (or whose ring no longer has
// the cursor) gets a fresh snapshot — or nothing at all when the cursor is
// exactly the thread's current seq.
func TestResumeOnAnotherNode(t *testing.T) {
	ns := startNATS(t)
	th := newTestThread(t, connect(t, ns), "acme", "n1")
	_, node1 := newServer(t, connect(t, ns), nil)
	_, node2 := newServer(t, connect(t, ns), nil)
	tok := token(t, "acme")
	th.publish(t, "a;")
	c := openSSE(t, node1.URL+"/v1/threads/n1/events", tok, nil)
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	cursor := c.lastID
	c.close()

	// Cursor current: node 2 sends nothing, then live frames.
	c2 := openSSE(t, node2.URL+"/v1/threads/n1/events", tok, http.Header{"Last-Event-Id": {cursor}})
	th.publish(t, "b;")
	b := aguiModel{text: a.text}
	b.follow(t, c2, th.Text, 5*time.Second)
	if b.snapshots != 0 {
		t.Fatalf("current cursor got %d snapshots, want 0", b.snapshots)
	}
	c2.close()

	// Cursor behind, on a third node: snapshot.
	_, node3 := newServer(t, connect(t, ns), nil)
	th.publish(t, "c;")
	c3 := openSSE(t, node3.URL+"/v1/threads/n1/events", tok, http.Header{"Last-Event-Id": {cursor}})
	d := aguiModel{text: a.text}
	d.follow(t, c3, th.Text, 5*time.Second)
	if d.snapshots != 1 {
		t.Fatalf("stale cursor got %d snapshots, want 1", d.snapshots)
	}
}

// A client that stops reading overflows its queue and is resynchronised
// with a snapshot, while a client reading normally never is. Consolidation
// is off here (it would fold this thread's deltas into one event: see
// TestSlowSubscriberCoalesced, and TestCoalescedStillOverflows for a
// backlog that overflows even consolidated).
func TestSlowSubscriberResynced(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "slow")
	srv, hs := newServer(t, nc, func(c *Config) {
		c.Hub.QueueBytes = 512 << 10
		c.Hub.CoalesceBytes = -1
		c.WriteTimeout = time.Minute // the slow client stalls on purpose
	})
	tok := token(t, "acme")
	th.publish(t, "start;")
	th.pad = `,"pad":"` + strings.Repeat("x", 16<<10) + `"`
	slow := openSSE(t, hs.URL+"/v1/threads/slow/events", tok, nil)
	fast := openSSE(t, hs.URL+"/v1/threads/slow/events", tok, nil)
	var fm, sm aguiModel
	fm.follow(t, fast, th.Text, 5*time.Second)

	// The reading client keeps pace by construction (each frame is read
	// before the next is published); the other never reads, so its writer
	// blocks once the socket buffers are full and its queue overflows.
	for i := 0; i < 600; i++ { // ~10 MB: more than loopback socket buffers hold
		th.publish(t, fmt.Sprintf("%d;", i))
		fm.follow(t, fast, th.Text, 10*time.Second)
	}
	if fm.snapshots != 1 {
		t.Fatalf("fast client resynced: %d snapshots", fm.snapshots)
	}
	if got := counterValue(srv.m.Drops.WithLabelValues(ReasonOverflow)); got < 1 {
		t.Fatalf("overflow drops = %v, want ≥ 1", got)
	}
	// The slow agui client's stream ended after what it had been sent
	// (an AG-UI stream cannot be resynchronised in place); it reconnects
	// with its Last-Event-ID like EventSource and ends with the whole text.
	sm.followReconnecting(t, slow, hs.URL+"/v1/threads/slow/events", tok, th.Text, 30*time.Second)
	if got := counterValue(srv.m.Ended.WithLabelValues(EndResync)); got < 1 {
		t.Fatalf("resync stream ends = %v", got)
	}
}

// A frame whose Tc-Prev does not follow is never a silent gap: a view-mode
// subscriber gets a fresh view in place; an agui subscriber's stream ends
// with its cursor, and reconnecting gets it a fresh stream.
func TestGapForcesSnapshot(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "gap")
	srv, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	th.publish(t, "a;")
	c := openSSE(t, hs.URL+"/v1/threads/gap/events", tok, nil)
	v := openSSE(t, hs.URL+"/v1/threads/gap/events?mode=view", tok, nil)
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	if m, err := v.next(); err != nil || !strings.Contains(m.data, `"type":"view","seq":2`) {
		t.Fatalf("first view: %+v %v", m, err)
	}
	// Lose a frame: advance the thread without publishing it.
	th.mu.Lock()
	th.seq += 5
	th.text.WriteString("lost;")
	th.mu.Unlock()
	th.publish(t, "b;")

	if m, err := v.next(); err != nil || !strings.Contains(m.data, `"type":"view","seq":9`) || !strings.Contains(m.data, `a;lost;b;`) {
		t.Fatalf("view after the gap: %+v %v", m, err)
	}
	expectEnd(t, c, "end reason=resync after=2")
	a.followReconnecting(t, c, hs.URL+"/v1/threads/gap/events", tok, th.Text, 5*time.Second)
	if a.snapshots != 2 || a.runsStarted != 2 {
		t.Fatalf("snapshots %d, RUN_STARTED %d: want a fresh stream (2, 2)", a.snapshots, a.runsStarted)
	}
	if got := counterValue(srv.m.Drops.WithLabelValues(ReasonGap)); got != 2 {
		t.Fatalf("gap drops = %v, want 2 (one per subscriber)", got)
	}
	if got := counterValue(srv.m.Resyncs.WithLabelValues(ReasonGap)); got != 1 {
		t.Fatalf("in-place resyncs = %v, want 1 (the view subscriber)", got)
	}
}

// A stream that was idle for longer than WriteTimeout is written to as
// any other: every batch starts under a fresh write deadline, whatever the
// last batch left behind. (A deadline moved only every few KiB would have
// expired by then, and the small frame's write would end the stream.)
func TestWriteAfterIdleOutlastingWriteTimeout(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "t1")
	s, hs := newServer(t, nc, func(c *Config) {
		c.WriteTimeout = 200 * time.Millisecond
		c.Heartbeat = time.Minute
	})
	c := openSSE(t, hs.URL+"/v1/threads/t1/events", token(t, "acme"), nil)
	defer c.close()
	var a aguiModel
	// A batch of several KiB, written under deadlines moved as it goes.
	th.publish(t, strings.Repeat("a", 3000)+";", strings.Repeat("b", 3000)+";", strings.Repeat("c", 3000)+";")
	a.follow(t, c, th.Text, 5*time.Second)
	time.Sleep(3 * 200 * time.Millisecond)
	th.publish(t, "d;")
	a.follow(t, c, th.Text, 5*time.Second)
	if n := counterValue(s.m.Ended.WithLabelValues(EndWrite)); n != 0 {
		t.Fatalf("%v streams ended for a write", n)
	}
}

// Over HTTP/1.1 an SSE stream takes its connection over from net/http: the
// head says Connection: close and declares no length and no chunked
// framing, so the body is the SSE bytes as written, ending when the stream
// does. A client that goes away ends its stream at once, though nothing is
// written to it for a minute (no heartbeat): the sink reads the connection,
// as net/http's background read did, and sees it close.
func TestSSEOwnsItsConnection(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "t1")
	th.publish(t, "a;", "b;")
	s, hs := newServer(t, nc, func(c *Config) { c.Heartbeat = time.Minute })

	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/threads/t1/events HTTP/1.1\r\nHost: threadcast\r\nAuthorization: Bearer %s\r\n\r\n", token(t, "acme"))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.TransferEncoding != nil || resp.ContentLength != -1 || !resp.Close {
		t.Fatalf("status %d, transfer encoding %v, length %d, close %v: want 200, none, -1 (until the connection closes), true",
			resp.StatusCode, resp.TransferEncoding, resp.ContentLength, resp.Close)
	}
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if _, err := http.ParseTime(resp.Header.Get("Date")); err != nil {
		t.Errorf("Date %q: %v", resp.Header.Get("Date"), err)
	}
	c := &sseClient{resp: resp, br: bufio.NewReader(resp.Body), cancel: func() { conn.Close() }}
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	th.publish(t, "c;")
	a.follow(t, c, th.Text, 5*time.Second)

	subs := s.m.Subscribers.WithLabelValues(AguiSSE.String())
	if n := counterValue(subs); n != 1 {
		t.Fatalf("%v subscribers, want 1", n)
	}
	conn.Close()
	testsupport.WaitFor(t, 5*time.Second, "the stream to end with its client", func() bool {
		return counterValue(subs) == 0 && counterValue(s.m.Ended.WithLabelValues(EndClient)) == 1
	})
}

// Over HTTP/2 the connection is not the stream's to take: the sink writes
// to the ResponseWriter, and the stream is the same.
func TestSSEOverHTTP2(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "t1")
	th.publish(t, "a;", "b;")
	cfg := DefaultConfig()
	cfg.AuthKey = testKey
	s, err := New(nc, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(func() { s.Drain(); ts.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/threads/t1/events", nil)
	req.Header.Set("Authorization", "Bearer "+token(t, "acme"))
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("status %d over HTTP/%d, want 200 over HTTP/2", resp.StatusCode, resp.ProtoMajor)
	}
	c := &sseClient{resp: resp, br: bufio.NewReader(resp.Body), cancel: cancel}
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	th.publish(t, "c;")
	a.follow(t, c, th.Text, 5*time.Second)
}

// TestJoinStaleCachedSnapshot: a fresh agui joiner on a node whose cached
// snapshot is older than the ring's newest frames by more than QueueBytes
// (another client joined a while ago and has kept up since). The cached
// snapshot and the frames after it do not fit in the queue; the joiner
// gets a fresh snapshot instead, on the first attempt, never a stream that
// ends before writing anything (which every reconnect, finding the same
// cached snapshot, would meet again).
func TestJoinStaleCachedSnapshot(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "jo")
	th.publish(t, "a;")
	_, hs := newServer(t, nc, func(c *Config) { c.Hub.QueueBytes = 8 << 10 })
	tok := token(t, "acme")
	first := openSSE(t, hs.URL+"/v1/threads/jo/events", tok, nil)
	defer first.close()
	var fm aguiModel
	fm.follow(t, first, th.Text, 2*time.Second) // its join caches the snapshot
	for i := 0; i < 20; i++ {                   // 20 KB of text, read as it comes: nobody falls behind
		th.publish(t, strconv.Itoa(i)+strings.Repeat("b", 1000)+";")
		fm.follow(t, first, th.Text, 2*time.Second)
	}

	c := openSSE(t, hs.URL+"/v1/threads/jo/events", tok, nil)
	defer c.close()
	var m aguiModel
	timer := time.AfterFunc(2*time.Second, c.cancel)
	defer timer.Stop()
	for m.text != th.Text() {
		msg, err := c.next()
		if err != nil || strings.Contains(msg.comment, "end reason") {
			t.Fatalf("the join ended with %q %v; text %q, want %q", msg.comment, err, shorten(m.text), shorten(th.Text()))
		}
		if msg.data != "" {
			m.apply(t, msg.data)
		}
	}
	if m.snapshots != 1 {
		t.Fatalf("%d snapshots, want 1", m.snapshots)
	}
}
