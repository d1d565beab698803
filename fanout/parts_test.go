package fanout

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/wire"
)

// TestFramesInParts: frames and snapshot replies sent in parts reach
// subscribers whole; a frame that loses a part is dropped whole (never
// applied in part, counted in BadFrames), and the next frame's Tc-Prev
// shows the gap, which a snapshot repairs: view subscribers in place, agui
// subscribers by reconnecting. Both end with exactly the thread's text.
func TestFramesInParts(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "p1")
	th.partSize = 200
	th.pad = `,"rawEvent":{"pad":"` + strings.Repeat("p", 300) + `"}` // every frame is in parts
	th.publish(t, "a;")
	srv, hs := newServer(t, nc, nil)
	tok := token(t, "acme")

	view := openSSE(t, hs.URL+"/v1/threads/p1/events?mode=view", tok, nil)
	agui := openSSE(t, hs.URL+"/v1/threads/p1/events", tok, nil)
	var a aguiModel
	a.follow(t, agui, th.Text, 5*time.Second) // the snapshot came in parts
	th.publish(t, "b;", "c;")
	a.follow(t, agui, th.Text, 5*time.Second)

	// The view subscriber has its join view before the gap: otherwise a
	// join still queued when the gap drops the queue is never sent, and
	// the repair is its first view.
	var text string
	views := 0
	readView := func() {
		t.Helper()
		m, err := view.next()
		if err != nil {
			t.Fatal(err)
		}
		if m.data == "" {
			return
		}
		var p struct {
			Type    string
			View    struct{ Messages []struct{ Content string } }
			Changes struct{ Append string }
		}
		if err := json.Unmarshal([]byte(m.data), &p); err != nil {
			t.Fatal(err)
		}
		switch p.Type {
		case "view":
			views++
			text = p.View.Messages[0].Content
		case "changes":
			text += p.Changes.Append
		}
		if !strings.HasPrefix(th.Text(), text) {
			t.Fatalf("view text %q is not a prefix of %q: a partial frame was applied", text, th.Text())
		}
	}
	for views == 0 {
		readView()
	}

	th.mu.Lock()
	th.dropPart = true
	th.mu.Unlock()
	th.publish(t, "d;") // lost: its second part never arrives
	th.publish(t, "e;")
	a.followReconnecting(t, agui, hs.URL+"/v1/threads/p1/events", tok, th.Text, 10*time.Second)

	// The view subscriber: the frames, then a fresh view after the gap
	// (never the frame that lost a part).
	deadline := time.Now().Add(10 * time.Second)
	for text != th.Text() {
		if time.Now().After(deadline) {
			t.Fatalf("view text %q, want %q", text, th.Text())
		}
		readView()
	}
	if views != 2 {
		t.Errorf("%d view payloads, want 2 (the join and the repair)", views)
	}
	if n := counterValue(srv.m.BadFrames); n != 1 {
		t.Errorf("bad frames %v, want 1 (the frame that lost a part)", n)
	}
	if n := counterValue(srv.m.Drops.WithLabelValues(ReasonGap)); n < 1 {
		t.Errorf("gap drops %v, want ≥ 1", n)
	}
}

// TestSnapshotTooLarge: a snapshot reply larger than MaxMessageBytes is
// refused as its first part announces it: the request fails at once with
// 502 snapshot_too_large (not a retry loop), and it is counted.
func TestSnapshotTooLarge(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "big")
	th.partSize = 100
	th.publish(t, strings.Repeat("x", 2000)+";")
	srv, hs := newServer(t, nc, func(c *Config) { c.Hub.MaxMessageBytes = 1000 })
	tok := token(t, "acme")
	start := time.Now()
	code, body := do(t, "GET", hs.URL+"/v1/threads/big", tok, "", nil)
	if code != http.StatusBadGateway || !strings.Contains(body, "snapshot_too_large") {
		t.Fatalf("status %d %s, want 502 snapshot_too_large", code, body)
	}
	if time.Since(start) > time.Second {
		t.Errorf("took %v: retried", time.Since(start))
	}
	if n := counterValue(srv.m.BadReplies); n != 1 {
		t.Errorf("bad replies %v, want 1", n)
	}
	if _, code := tryOpenSSE(t, hs.URL+"/v1/threads/big/events", tok, nil); code != http.StatusBadGateway {
		t.Errorf("stream: status %d, want 502", code)
	}
}

// TestTapInParts: tap messages larger than one NATS message reach a tap
// reader whole, even with other threads' messages between their parts; a
// message that lost a part is dropped whole and counted.
func TestTapInParts(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	pub := connect(t, ns)
	srv, hs := newServer(t, nc, nil)
	req, _ := http.NewRequest("GET", hs.URL+"/v1/tap?format=ndjson", nil)
	req.Header.Set("Authorization", "Bearer "+token(t, "acme"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tap: %d", resp.StatusCode)
	}
	big := func(c string) []byte {
		return []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat(c, 3000) + `"}`)
	}
	split := func(subject string, data []byte) []*nats.Msg {
		var r recordingPub
		if err := wire.Publish(&r, &nats.Msg{Subject: subject, Header: nats.Header{wire.HeaderSeq: {"1"}}, Data: data}, 1000); err != nil {
			t.Fatal(err)
		}
		return r.msgs
	}
	a := split("tap.acme.TEXT_MESSAGE_CONTENT.t1", big("a"))
	lost := split("tap.acme.TEXT_MESSAGE_CONTENT.t3", big("l"))
	small := &nats.Msg{Subject: "tap.acme.RUN_STARTED.t2", Data: []byte(`{"type":"RUN_STARTED","threadId":"t2","runId":"r"}`)}
	c := split("tap.acme.TEXT_MESSAGE_CONTENT.t1", big("c"))
	// a's parts with t2's message between them; t3 loses its middle part.
	for _, m := range []*nats.Msg{a[0], small, a[1], lost[0], a[2], lost[2], a[3], c[0], c[1], c[2], c[3]} {
		if err := pub.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	_ = pub.Flush()
	br := bufio.NewReader(resp.Body)
	var got []string
	for len(got) < 3 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimSpace(line))
	}
	want := []string{string(small.Data), string(big("a")), string(big("c"))}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("tap line %d: %.60q, want %.60q", i, got[i], want[i])
		}
	}
	testsupport.WaitFor(t, 5*time.Second, "the lost message counted", func() bool { return counterValue(srv.m.BadTap) >= 1 })
}

// recordingPub keeps what it is asked to publish.
type recordingPub struct{ msgs []*nats.Msg }

func (r *recordingPub) PublishMsg(m *nats.Msg) error {
	h := nats.Header{}
	for k, v := range m.Header {
		h[k] = append([]string(nil), v...)
	}
	r.msgs = append(r.msgs, &nats.Msg{Subject: m.Subject, Header: h, Data: append([]byte(nil), m.Data...)})
	return nil
}

// TestLargeSnapshotSlowClient: a snapshot that takes longer than
// WriteTimeout to send, to a client that reads it steadily, is sent whole:
// the timeout bounds how long the client accepts no bytes, not the send.
func TestLargeSnapshotSlowClient(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "slow")
	th.partSize = 512 << 10
	text := strings.Repeat("s", 24<<20) + ";"
	th.publish(t, text)
	_, hs := newServer(t, nc, func(c *Config) { c.WriteTimeout = time.Second; c.Hub.SnapshotTimeout = 30 * time.Second })
	c := openSSE(t, hs.URL+"/v1/threads/slow/events?mode=view", token(t, "acme"), nil)
	start := time.Now()
	var got int
	buf := make([]byte, 256<<10)
	var line []byte
	for !strings.HasSuffix(string(line), "}\n\n") || got < len(text) {
		n, err := c.br.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes in %v: %v", got, time.Since(start), err)
		}
		got += n
		line = append(line[:0], buf[max(0, n-4):n]...)
		time.Sleep(20 * time.Millisecond) // about 12 MB/s: 2 s for the snapshot
	}
	if d := time.Since(start); d < time.Second {
		t.Logf("the snapshot took only %v: the test did not outlast WriteTimeout", d)
	}
}

// TestSnapshotLostPartRetried: a snapshot reply that loses a part is asked
// for again (RetryLost), and the join succeeds.
func TestSnapshotLostPartRetried(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "lossy")
	th.publish(t, strings.Repeat("x", 2000)+";")
	th.mu.Lock()
	th.partSize, th.dropPart = 200, true // the next reply loses its second part
	th.mu.Unlock()
	srv, hs := newServer(t, nc, nil)
	code, body := do(t, "GET", hs.URL+"/v1/threads/lossy", token(t, "acme"), "", nil)
	if code != http.StatusOK || !strings.Contains(body, th.Text()) {
		t.Fatalf("status %d, %.80s", code, body)
	}
	if n := counterValue(srv.m.SnapshotRetries.WithLabelValues(RetryLost)); n != 1 {
		t.Errorf("lost retries %v, want 1", n)
	}
	if n := counterValue(srv.m.BadReplies); n != 1 {
		t.Errorf("bad replies %v, want 1", n)
	}
}

// TestFrameNotHeldBehindDroppedMessage: a frame followed at once by a
// message the feed drops (malformed here; equally a part of a frame still
// in assembly, or one of a frame that lost a part) reaches subscribers
// without waiting for the next heartbeat: the dropped message, the last of
// its burst, still wakes the writers the frame before it marked dirty.
func TestFrameNotHeldBehindDroppedMessage(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "hb")
	th.publish(t, "a;")
	_, hs := newServer(t, nc, nil) // Heartbeat 15 s
	c := openSSE(t, hs.URL+"/v1/threads/hb/events", token(t, "acme"), nil)
	defer c.close()
	var m aguiModel
	m.follow(t, c, th.Text, 2*time.Second)
	for i := 0; i < 5; i++ {
		// A frame and, right behind it, a message that is not a frame.
		th.publish(t, "x"+strconv.Itoa(i)+";")
		if err := th.nc.PublishMsg(&nats.Msg{Subject: wire.ViewSubject("acme", "hb"), Data: []byte(`{}`),
			Header: nats.Header{wire.HeaderSeq: {"bogus"}}}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		timer := time.AfterFunc(3*time.Second, c.cancel)
		for m.text != th.Text() {
			msg, err := c.next()
			if err != nil {
				t.Fatalf("frame %d: not delivered within %v (text %q, want %q)", i, time.Since(start).Round(time.Millisecond), shorten(m.text), shorten(th.Text()))
			}
			if msg.data != "" {
				m.apply(t, msg.data)
			}
		}
		timer.Stop()
	}
}
