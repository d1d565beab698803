package fanout

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
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

	th.mu.Lock()
	th.dropPart = true
	th.mu.Unlock()
	th.publish(t, "d;") // lost: its second part never arrives
	th.publish(t, "e;")
	a.followReconnecting(t, agui, hs.URL+"/v1/threads/p1/events", tok, th.Text, 10*time.Second)

	// The view subscriber: the snapshot, two frames, then a fresh view
	// after the gap (never the frame that lost a part).
	text := ""
	deadline := time.Now().Add(10 * time.Second)
	views := 0
	for text != th.Text() {
		if time.Now().After(deadline) {
			t.Fatalf("view text %q, want %q", text, th.Text())
		}
		m, err := view.next()
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Type    string
			View    struct{ Messages []struct{ Content string } }
			Changes struct{ Append string }
		}
		if m.data == "" {
			continue
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
