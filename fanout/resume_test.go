package fanout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/internal/testsupport"
)

// 1,000 reconnects, each with a Last-Event-ID picked at random among every
// id the client has seen (frame ends, positions inside frames, ids inside
// snapshots), on either of two nodes, while the thread keeps growing. The
// client restores the state it had at that id, as a client persisting its
// view per cursor would; after every message its text must be a prefix of
// the thread's text (each delta is unique, so a duplicate or a gap breaks
// the prefix at once), and it must end with the whole text.
func TestThousandRandomResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 1,000 HTTP reconnects")
	}
	ns := startNATS(t)
	th := newTestThread(t, connect(t, ns), "acme", "rr")
	// A small ring, so that old cursors fall out of it and take the
	// snapshot path.
	mod := func(c *Config) { c.Hub.RingFrames = 32 }
	srv1, n1 := newServer(t, connect(t, ns), mod)
	srv2, n2 := newServer(t, connect(t, ns), mod)
	nodes := []string{n1.URL, n2.URL}
	tok := token(t, "acme")
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]string{"": ""} // id → text after that message
	ids := []string{""}
	frame := 0
	publish := func() {
		chunks := make([]string, 1+r.IntN(3))
		for j := range chunks {
			chunks[j] = fmt.Sprintf("%d.%d;", frame, j)
		}
		frame++
		th.publish(t, chunks...)
	}
	publish()
	for reconnect := 0; reconnect < 1000; reconnect++ {
		cursor := ids[r.IntN(len(ids))]
		text := seen[cursor]
		var hdr http.Header
		if cursor != "" {
			hdr = http.Header{"Last-Event-Id": {cursor}}
		}
		c := openSSE(t, nodes[r.IntN(2)]+"/v1/threads/rr/events", tok, hdr)
		m := aguiModel{text: text}
		if r.IntN(3) == 0 {
			publish()
		}
		want := th.Text()
		n := 1 + r.IntN(8)
		timer := time.AfterFunc(5*time.Second, c.cancel)
		for read := 0; read < n && m.text != want; {
			msg, err := c.next()
			if err != nil {
				t.Fatalf("reconnect %d (cursor %q): %v with %q", reconnect, cursor, err, shorten(m.text))
			}
			if msg.data != "" {
				m.apply(t, msg.data)
				read++
				if !strings.HasPrefix(want, m.text) {
					t.Fatalf("reconnect %d (cursor %q): text %q is not a prefix of the thread's %q", reconnect, cursor, shorten(m.text), shorten(want))
				}
			}
			if msg.hasID {
				if _, ok := seen[msg.id]; !ok {
					ids = append(ids, msg.id)
				}
				seen[msg.id] = m.text
			}
		}
		timer.Stop()
		c.close()
	}
	c := openSSE(t, n1.URL+"/v1/threads/rr/events", tok, http.Header{"Last-Event-Id": {ids[len(ids)-1]}})
	m := aguiModel{text: seen[ids[len(ids)-1]]}
	m.follow(t, c, th.Text, 5*time.Second)
	resumes := counterValue(srv1.m.Resyncs.WithLabelValues(ReasonResume)) + counterValue(srv2.m.Resyncs.WithLabelValues(ReasonResume))
	joins := counterValue(srv1.m.Resyncs.WithLabelValues(ReasonJoin)) + counterValue(srv2.m.Resyncs.WithLabelValues(ReasonJoin))
	t.Logf("%d frames, %d distinct ids; %v resumed from a ring, %v from a snapshot", frame, len(ids), resumes, joins)
	if resumes < 100 || joins < 10 {
		t.Fatalf("both paths must be exercised: %v ring resumes, %v snapshots", resumes, joins)
	}
}

// TestOnlyNewestFramesKeepEncodings: of a thread's ring, only the newest
// keepEncoded frames keep their encodings; an older one is encoded again,
// byte for byte as the live stream had it, and a client resuming from an
// older frame gets every later event.
func TestOnlyNewestFramesKeepEncodings(t *testing.T) {
	ns := startNATS(t)
	th := newTestThread(t, connect(t, ns), "acme", "enc")
	th.publish(t, "a;")
	srv, hs := newServer(t, connect(t, ns), nil)
	tok := token(t, "acme")
	url := hs.URL + "/v1/threads/enc/events"
	live := openSSE(t, url, tok, nil)
	defer live.close()
	const frames = 3 * keepEncoded
	var want strings.Builder // the chunks after the second
	var last string
	for i := range frames {
		last = fmt.Sprintf("b%d;", i)
		th.publish(t, last)
		if i >= 2 {
			want.WriteString(last)
		}
	}
	byID := map[string]sseMsg{} // what the live stream delivered after its snapshot, by id
	var ids []string
	for {
		m, err := live.next()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(m.data, `"delta":"b`) {
			byID[m.id] = m
			ids = append(ids, m.id)
		}
		if strings.Contains(m.data, last) {
			break
		}
	}
	if len(ids) != frames {
		t.Fatalf("the live stream delivered %d chunks, want %d", len(ids), frames)
	}

	f := srv.hub.lookup("acme", "enc")
	f.mu.Lock()
	n := f.ring.n
	for i := range n {
		fr := f.ring.at(i)
		if has, want := fr.enc[AguiSSE] != nil, i >= n-keepEncoded; has != want {
			f.mu.Unlock()
			t.Fatalf("ring frame %d of %d (seq %d): encoded %v, want %v", i, n, fr.seq, has, want)
		}
	}
	// The oldest, encoded again, is what the live stream read.
	fr := f.ring.at(0)
	enc := bytes.Join(fr.encoding(AguiSSE, 0), nil)
	f.mu.Unlock()
	if n < frames {
		t.Fatalf("the ring holds %d frames, want at least %d", n, frames)
	}
	again, err := testsupport.ReadSSE(bufio.NewReader(bytes.NewReader(enc)))
	if err != nil {
		t.Fatal(err)
	}
	if had := byID[again.ID]; had.data != again.Data {
		t.Fatalf("frame %d encoded again: id %q data %.80q; live: data %.80q", fr.seq, again.ID, again.Data, had.data)
	}

	// Resume after the second chunk: the events of every later frame, most
	// of them no longer encoded, come again (consolidated, as a replay of
	// that many frames is).
	resumed := openSSE(t, url, tok, http.Header{"Last-Event-ID": {ids[1]}})
	defer resumed.close()
	var text strings.Builder
	for !strings.HasSuffix(text.String(), last) {
		m, err := resumed.next()
		if err != nil {
			t.Fatal(err)
		}
		var ev struct{ Type, Delta string }
		if json.Unmarshal([]byte(m.data), &ev) == nil && ev.Type == "TEXT_MESSAGE_CONTENT" {
			text.WriteString(ev.Delta)
		}
	}
	if text.String() != want.String() {
		t.Fatalf("resumed after %s: text %q, want %q", ids[1], text.String(), want.String())
	}
}

// followView reads a view-mode stream until it has the frame at seq: the
// feed's ring then holds every frame up to it.
func followView(t *testing.T, c *sseClient, seq uint64) {
	t.Helper()
	for {
		m, err := c.next()
		if err != nil {
			t.Fatal(err)
		}
		if m.id == strconv.FormatUint(seq, 10) {
			return
		}
	}
}

// TestResumeReplayOverQueueBytes: an agui client resumes from a cursor
// the ring holds, on a node where only a dashboard (view mode) reads the
// thread, and the frames after the cursor are more than QueueBytes, even
// consolidated. The replay cannot be sent; the client gets the thread from
// a snapshot instead, on the first attempt, never a stream that ends
// before writing anything (which its reconnect with the same cursor would
// meet again, forever).
func TestResumeReplayOverQueueBytes(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "ro")
	cur := th.publish(t, "a;")
	_, hs := newServer(t, nc, func(c *Config) { c.Hub.QueueBytes = 8 << 10 })
	tok := token(t, "acme")
	dash := openSSE(t, hs.URL+"/v1/threads/ro/events?mode=view", tok, nil)
	defer dash.close()
	for i := 0; i < 20; i++ { // 20 KB of text after the cursor
		th.publish(t, strconv.Itoa(i)+strings.Repeat("b", 1000)+";")
	}
	followView(t, dash, th.seq)

	c := openSSE(t, hs.URL+"/v1/threads/ro/events", tok, http.Header{"Last-Event-Id": {strconv.FormatUint(cur, 10)}})
	defer c.close()
	m := aguiModel{text: "a;"} // what the client holds at its cursor
	timer := time.AfterFunc(2*time.Second, c.cancel)
	defer timer.Stop()
	for m.text != th.Text() {
		msg, err := c.next()
		if err != nil || strings.Contains(msg.comment, "end reason") {
			t.Fatalf("the resume from %d ended with %q %v; text %q, want %q", cur, msg.comment, err, shorten(m.text), shorten(th.Text()))
		}
		if msg.data != "" {
			m.apply(t, msg.data)
		}
	}
	if m.snapshots != 1 {
		t.Fatalf("%d snapshots, want 1 (the replay does not fit)", m.snapshots)
	}
}

// endSink is a sink that records how its stream ended.
type endSink struct {
	items  int // written
	reason string
	cursor uint64
}

func (k *endSink) open() error                      { return nil }
func (k *endSink) write(items []item) (int, error)  { k.items += len(items); return 0, nil }
func (k *endSink) heartbeat() error                 { return nil }
func (k *endSink) probe() error                     { return nil }
func (k *endSink) end(reason string, cursor uint64) { k.reason, k.cursor = reason, cursor }

// TestResyncBeforeFirstWriteKeepsCursor: an agui stream that resumed from
// the client's cursor and must end for a resync before its writer wrote
// anything names that cursor in its end hint: the client holds exactly
// what it held, and resumes from there (not from 0, a fresh snapshot).
func TestResyncBeforeFirstWriteKeepsCursor(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "rc")
	th.publish(t, "a;")
	srv, hs := newServer(t, nc, nil)
	dash := openSSE(t, hs.URL+"/v1/threads/rc/events?mode=view", token(t, "acme"), nil)
	defer dash.close()
	cur := th.publish(t, "b;")
	th.publish(t, "c;")
	followView(t, dash, th.seq)

	sub, err := srv.hub.Subscribe(t.Context(), "acme", "rc", AguiSSE, ParseCursor(strconv.FormatUint(cur, 10)))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	f := sub.feed
	f.mu.Lock()
	sub.dropLocked(ReasonGap) // before its writer takes the frame after the cursor
	f.mu.Unlock()
	var k endSink
	if reason := srv.pump(t.Context(), sub, &k, nil, nil, false, time.Now().Add(time.Hour)); reason != EndResync || k.items != 0 {
		t.Fatalf("stream ended %q after %d items, want %q after none", reason, k.items, EndResync)
	}
	if k.reason != EndResync || k.cursor != cur {
		t.Fatalf("end hint reason=%s after=%d, want reason=%s after=%d", k.reason, k.cursor, EndResync, cur)
	}
}
