package fanout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// NOTE: long threads and large views end to end: the real ingest on an
// embedded server with the default max payload (8 MiB), so that views of
// many megabytes reach the fanout in parts. Every result a client gets is
// compared with the offline reduction (reducer applied to the events as
// published, with their stream seqs) by an AG-UI message model that does
// not use the reducer (msgModel).

// largeEnv is a NATS server, the real ingest and one fanout node.
type largeEnv struct {
	js    jetstream.JetStream
	url   string
	tok   string
	parts int
}

func startLarge(t testing.TB, mod func(*Config)) *largeEnv {
	t.Helper()
	return startLargeWith(t, mod, nil)
}

// startLargeWith is startLarge with the ingest's config changed by imod.
func startLargeWith(t testing.TB, mod func(*Config), imod func(*pipeline.Config)) *largeEnv {
	t.Helper()
	sc := natsembed.DefaultConfig()
	sc.StoreDir = t.TempDir()
	ns, err := natsembed.Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	const parts = 4
	cfg := pipeline.DefaultConfig()
	cfg.Partitions = parts
	cfg.Shards = 2
	cfg.CheckpointInterval = 50 * time.Millisecond
	cfg.Logger = slog.New(slog.DiscardHandler)
	if imod != nil {
		imod(&cfg)
	}
	startIngestWith(t, ns, cfg)
	_, hs := newServer(t, connectURL(t, ns.ClientURL()), func(c *Config) {
		c.Hub.Partitions = parts
		c.Hub.SnapshotTimeout = 30 * time.Second
		if mod != nil {
			mod(c)
		}
	})
	js, err := jetstream.New(connectURL(t, ns.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	return &largeEnv{js: js, url: hs.URL, tok: token(t, "acme"), parts: parts}
}

// longThread returns a run of n assistant messages of size bytes of text
// each (START, CONTENT, END), each text unique. The run is left open, so
// that more can follow.
func longThread(thread string, first, n, size int) []json.RawMessage {
	var evs []json.RawMessage
	if first == 0 {
		evs = append(evs, json.RawMessage(`{"type":"RUN_STARTED","threadId":"`+thread+`","runId":"r1"}`))
	}
	pad := strings.Repeat("y", max(0, size-10))
	for i := first; i < first+n; i++ {
		id := "m" + strconv.Itoa(i)
		evs = append(evs,
			json.RawMessage(`{"type":"TEXT_MESSAGE_START","messageId":"`+id+`","role":"assistant"}`),
			json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"`+id+`","delta":"`+fmt.Sprintf("%010d", i)+pad+`"}`),
			json.RawMessage(`{"type":"TEXT_MESSAGE_END","messageId":"`+id+`"}`))
	}
	return evs
}

// publish stores events as JSONL messages of up to 4 MiB and returns each
// event's stream seq.
func (e *largeEnv) publish(t testing.TB, thread string, events []json.RawMessage) []uint64 {
	t.Helper()
	subj, err := wire.EventSubject("acme", thread)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var futs []jetstream.PubAckFuture
	var counts []int
	for i := 0; i < len(events); {
		var b []byte
		n := 0
		for i+n < len(events) && (n == 0 || len(b)+len(events[i+n]) < 4<<20) {
			if n > 0 {
				b = append(b, '\n')
			}
			b = append(b, events[i+n]...)
			n++
		}
		f, err := e.js.PublishMsgAsync(&nats.Msg{Subject: subj, Data: b})
		if err != nil {
			t.Fatal(err)
		}
		futs, counts = append(futs, f), append(counts, n)
		i += n
	}
	var seqs []uint64
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			for range counts[i] {
				seqs = append(seqs, ack.Sequence)
			}
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	return seqs
}

// offline is the reduction of events (with their seqs) by the reducer:
// its messages as the JSON a consumer holds.
func offline(t *testing.T, thread string, events []json.RawMessage, seqs []uint64) []aguiMessage {
	t.Helper()
	th := reducer.NewThread(thread)
	var dec codec.Decoder
	var ev codec.Event
	for i, raw := range events {
		if err := dec.Decode(bytes.Clone(raw), &ev); err != nil {
			t.Fatal(err)
		}
		if res := th.Apply(seqs[i], &ev); res.Fatal != nil {
			t.Fatal(res.Fatal)
		}
	}
	var v struct{ Messages []aguiMessage }
	if err := json.Unmarshal(th.AppendView(nil), &v); err != nil {
		t.Fatal(err)
	}
	return v.Messages
}

type aguiMessage struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Content string `json:"content"`
}

// msgModel is what an AG-UI client holds of a thread's text messages:
// MESSAGES_SNAPSHOT replaces them, START/CONTENT and CHUNK build them. It
// does not use the reducer.
type msgModel struct {
	msgs      []aguiMessage
	index     map[string]int
	snapshots int
}

func (m *msgModel) apply(t testing.TB, data []byte) {
	t.Helper()
	var ev struct {
		Type      string        `json:"type"`
		MessageID string        `json:"messageId"`
		Role      string        `json:"role"`
		Delta     string        `json:"delta"`
		Messages  []aguiMessage `json:"messages"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("bad event %.80q: %v", data, err)
	}
	switch ev.Type {
	case "MESSAGES_SNAPSHOT":
		m.snapshots++
		m.msgs, m.index = ev.Messages, make(map[string]int, len(ev.Messages))
		for i, msg := range m.msgs {
			m.index[msg.ID] = i
		}
	case "TEXT_MESSAGE_START":
		if m.index == nil {
			m.index = map[string]int{}
		}
		m.index[ev.MessageID] = len(m.msgs)
		m.msgs = append(m.msgs, aguiMessage{ID: ev.MessageID, Role: ev.Role})
	case "TEXT_MESSAGE_CONTENT":
		i, ok := m.index[ev.MessageID]
		if !ok {
			t.Fatalf("content for unknown message %s", ev.MessageID)
		}
		m.msgs[i].Content += ev.Delta
	case "TEXT_MESSAGE_CHUNK": // what a compacted triad becomes: the first chunk of an id starts it
		if m.index == nil {
			m.index = map[string]int{}
		}
		i, ok := m.index[ev.MessageID]
		if !ok {
			role := ev.Role
			if role == "" {
				role = "assistant"
			}
			i = len(m.msgs)
			m.index[ev.MessageID] = i
			m.msgs = append(m.msgs, aguiMessage{ID: ev.MessageID, Role: role})
		}
		m.msgs[i].Content += ev.Delta
	}
}

func sameMessages(t testing.TB, what string, got, want []aguiMessage) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d messages, want %d; first difference at %d", what, len(got), len(want), i)
	}
}

// viewMessages decodes the messages of a view document.
func viewMessages(t testing.TB, view []byte) []aguiMessage {
	t.Helper()
	var v struct{ Messages []aguiMessage }
	if err := json.Unmarshal(view, &v); err != nil {
		t.Fatalf("view: %v", err)
	}
	return v.Messages
}

// waitSeq waits until the REST view reaches seq and returns its body.
func (e *largeEnv) waitSeq(t testing.TB, thread string, seq uint64) (view []byte) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest("GET", e.url+"/v1/threads/"+thread, nil)
		req.Header.Set("Authorization", "Bearer "+e.tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK && resp.Header.Get(wire.HeaderSeq) == strconv.FormatUint(seq, 10) {
			var body struct{ View json.RawMessage }
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatal(err)
			}
			return body.View
		}
		if time.Now().After(deadline) {
			t.Fatalf("REST view: status %d, seq %s, want %d", resp.StatusCode, resp.Header.Get(wire.HeaderSeq), seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sse opens an SSE stream on path of the environment's server, with the
// environment's token and the extra headers hdr. The caller reads the join
// (aguiUntil for agui).
func (e *largeEnv) sse(t *testing.T, path string, hdr http.Header) *sseClient {
	t.Helper()
	return openSSE(t, e.url+path, e.tok, hdr)
}

// aguiUntil reads agui SSE events into m until an event with id == seq.
func aguiUntil(t *testing.T, c *sseClient, m *msgModel, seq uint64) {
	t.Helper()
	want := strconv.FormatUint(seq, 10)
	timer := time.AfterFunc(60*time.Second, c.cancel)
	defer timer.Stop()
	var comment string
	for {
		msg, err := c.next()
		if err != nil {
			t.Fatalf("stream ended before seq %d: %v (last id %q, last comment %q)", seq, err, c.lastID, comment)
		}
		if msg.comment != "" {
			comment = msg.comment
		}
		if msg.data != "" {
			m.apply(t, []byte(msg.data))
		}
		if msg.hasID && msg.id == want {
			return
		}
	}
}

// wsDial opens a WebSocket on path of the environment's server, with the
// environment's token and no read limit to speak of; the test closes it.
func wsDial(t *testing.T, e *largeEnv, path string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(e.url, "http")
	c, _, err := websocket.Dial(ctx, ws+path, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.tok}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 30)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// checkLongThread publishes a thread of n messages of size bytes and
// checks every way to read it against the offline reduction: REST, SSE
// and WebSocket joins in both modes, a late join while more messages
// stream in, a resume from the ring and one from behind it.
func checkLongThread(t *testing.T, n, size, minView int) {
	e := startLarge(t, func(c *Config) {
		c.Hub.RingBytes = 1 // the ring keeps only the newest frame: a resume from further back is behind it
	})
	const thread = "long"
	events := longThread(thread, 0, n, size)
	seqs := e.publish(t, thread, events)
	last := seqs[len(seqs)-1]
	want := offline(t, thread, events, seqs)

	// REST full view.
	view := e.waitSeq(t, thread, last)
	sameMessages(t, "REST", viewMessages(t, view), want)
	t.Logf("%d messages, a view of %d bytes", n, len(view))
	if len(view) < minView {
		t.Fatalf("a view of %d bytes, want at least %d", len(view), minView)
	}

	// SSE, agui: the snapshot events bring the model to the view.
	var m msgModel
	c := e.sse(t, "/v1/threads/"+thread+"/events", nil)
	aguiUntil(t, c, &m, last)
	sameMessages(t, "SSE agui join", m.msgs, want)
	c.close()

	// SSE, view: the first payload is the view at the seq it names.
	v := e.sse(t, "/v1/threads/"+thread+"/events?mode=view", nil)
	msg, err := v.next()
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Type string
		Seq  uint64
		View json.RawMessage
	}
	if err := json.Unmarshal([]byte(msg.data), &p); err != nil || p.Type != "view" || p.Seq != last {
		t.Fatalf("SSE view join: %v, type %q seq %d", err, p.Type, p.Seq)
	}
	sameMessages(t, "SSE view join", viewMessages(t, p.View), want)
	v.close()

	// WebSocket, both modes.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wa := wsDial(t, e, "/v1/threads/"+thread+"/events")
	var wm msgModel
	for wm.snapshots == 0 || !reflect.DeepEqual(wm.msgs, want) {
		_, data, err := wa.Read(ctx)
		if err != nil {
			t.Fatalf("WS agui join: %v with %d messages", err, len(wm.msgs))
		}
		wm.apply(t, data)
	}
	wv := wsDial(t, e, "/v1/threads/"+thread+"/events?mode=view")
	_, data, err := wv.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &p); err != nil || p.Type != "view" || p.Seq != last {
		t.Fatalf("WS view join: %v, type %q seq %d", err, p.Type, p.Seq)
	}
	sameMessages(t, "WS view join", viewMessages(t, p.View), want)

	// A late join while the thread streams: more messages arrive while a
	// client joins; it ends with exactly the reduction of everything.
	live := e.sse(t, "/v1/threads/"+thread+"/events", nil)
	var lm msgModel
	aguiUntil(t, live, &lm, last)
	more := longThread(thread, n, 200, 100)
	done := make(chan []uint64, 1)
	go func() {
		var s []uint64
		for i := 0; i < len(more); i += 60 { // 20 messages per publish
			s = append(s, e.publishQuiet(thread, more[i:min(i+60, len(more))])...)
		}
		done <- s
	}()
	late := e.sse(t, "/v1/threads/"+thread+"/events", nil)
	var latem msgModel
	lateView := e.sse(t, "/v1/threads/"+thread+"/events?mode=view", nil)
	lv, err := lateView.next()
	if err != nil {
		t.Fatal(err)
	}
	moreSeqs := <-done
	if len(moreSeqs) != len(more) {
		t.Fatalf("published %d of %d events", len(moreSeqs), len(more))
	}
	all, allSeqs := append(append([]json.RawMessage(nil), events...), more...), append(append([]uint64(nil), seqs...), moreSeqs...)
	end := allSeqs[len(allSeqs)-1]
	wantAll := offline(t, thread, all, allSeqs)
	aguiUntil(t, late, &latem, end)
	sameMessages(t, "late join", latem.msgs, wantAll)
	// The view-mode late join: its view is the reduction at the seq it names.
	if err := json.Unmarshal([]byte(lv.data), &p); err != nil || p.Type != "view" {
		t.Fatalf("late view join: %v, type %q", err, p.Type)
	}
	sameMessages(t, "late view join", viewMessages(t, p.View), offlineAt(t, thread, all, allSeqs, p.Seq))
	lateView.close()
	aguiUntil(t, live, &lm, end)
	sameMessages(t, "live subscriber", lm.msgs, wantAll)
	if lm.snapshots != 1 {
		t.Errorf("the live subscriber had %d snapshots, want 1", lm.snapshots)
	}

	// Resume from the ring: a client that left at seqs of the last few
	// frames continues with no snapshot; one that left at the first
	// join's seq (behind the ring, which keeps the newest frame only) gets a fresh snapshot.
	// Both end at the reduction of everything.
	extra := longThread(thread, n+200, 3, 100)
	resumeAt := end
	extraSeqs := e.publish(t, thread, extra)
	all, allSeqs = append(all, extra...), append(allSeqs, extraSeqs...)
	end = allSeqs[len(allSeqs)-1]
	wantAll = offline(t, thread, all, allSeqs)
	aguiUntil(t, live, &lm, end) // the feed has the frames in its ring
	for _, tt := range []struct {
		name      string
		from      uint64
		snapshots int
	}{{"from the ring", resumeAt, 0}, {"from behind the ring", last, 1}} {
		r := e.sse(t, "/v1/threads/"+thread+"/events", http.Header{"Last-Event-ID": {strconv.FormatUint(tt.from, 10)}})
		var rm msgModel
		if tt.snapshots == 0 {
			// The client held the reduction at from; it gets only what follows.
			rm.apply(t, mustMarshal(map[string]any{"type": "MESSAGES_SNAPSHOT", "messages": offlineAt(t, thread, all, allSeqs, tt.from)}))
			rm.snapshots = 0
		}
		aguiUntil(t, r, &rm, end)
		if rm.snapshots != tt.snapshots {
			t.Errorf("resume %s: %d snapshots, want %d", tt.name, rm.snapshots, tt.snapshots)
		}
		sameMessages(t, "resume "+tt.name, rm.msgs, wantAll)
		r.close()
	}
}

// offlineAt is the reduction of the events with seq ≤ at.
func offlineAt(t *testing.T, thread string, events []json.RawMessage, seqs []uint64, at uint64) []aguiMessage {
	n := 0
	for n < len(seqs) && seqs[n] <= at {
		n++
	}
	return offline(t, thread, events[:n], seqs[:n])
}

// publishQuiet publishes from a goroutine that may not call t.Fatal; it
// returns what it could publish.
func (e *largeEnv) publishQuiet(thread string, events []json.RawMessage) []uint64 {
	subj, _ := wire.EventSubject("acme", thread)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b []byte
	for i, ev := range events {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, ev...)
	}
	ack, err := e.js.Publish(ctx, subj, b)
	if err != nil {
		return nil
	}
	seqs := make([]uint64, len(events))
	for i := range seqs {
		seqs[i] = ack.Sequence
	}
	return seqs
}

// TestLongThread10k: a thread of 10,000 messages, a view of 5 MB: its
// snapshot reply (the view and the snapshot events) is larger than the
// server's 8 MiB max payload, so it reaches the fanout in parts.
func TestLongThread10k(t *testing.T) { checkLongThread(t, 10000, 480, 5<<20) }
