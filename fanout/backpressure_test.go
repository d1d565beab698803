package fanout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/jsondoc"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// smallBufListener gives every accepted connection a small kernel send
// buffer, so that a reader that stops reading fills its queue here after a
// few kilobytes rather than after what the kernel would otherwise absorb.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

// smallBufClient reads with a small kernel receive buffer.
func smallBufClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(8 << 10)
			}
			return c, err
		},
	}}
}

// backpressureStream is a thread of several runs, each streaming a message
// and a tool call's arguments in small deltas and patching the state event
// by event: what an agent sends, and what consolidation folds.
func backpressureStream(thread string, runs, deltas int) []string {
	var evs []string
	for r := 0; r < runs; r++ {
		evs = append(evs, fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":"r%d"}`, thread, r))
		if r == 0 {
			evs = append(evs, `{"type":"STATE_SNAPSHOT","snapshot":{"n":0,"log":[]}}`)
		}
		evs = append(evs, fmt.Sprintf(`{"type":"TEXT_MESSAGE_START","messageId":"m%d","role":"assistant"}`, r))
		for i := 0; i < deltas; i++ {
			evs = append(evs, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m%d","delta":"w%d.%d lorem ipsum dolor sit amet, "}`, r, r, i))
		}
		evs = append(evs, fmt.Sprintf(`{"type":"TEXT_MESSAGE_END","messageId":"m%d"}`, r))
		evs = append(evs, fmt.Sprintf(`{"type":"TOOL_CALL_START","toolCallId":"t%d","toolCallName":"search","parentMessageId":"m%d"}`, r, r))
		evs = append(evs, fmt.Sprintf(`{"type":"TOOL_CALL_ARGS","toolCallId":"t%d","delta":"{\"q\":\""}`, r))
		for i := 0; i < deltas/4; i++ {
			evs = append(evs, fmt.Sprintf(`{"type":"TOOL_CALL_ARGS","toolCallId":"t%d","delta":"a%d "}`, r, i))
		}
		evs = append(evs, fmt.Sprintf(`{"type":"TOOL_CALL_ARGS","toolCallId":"t%d","delta":"\"}"}`, r))
		evs = append(evs, fmt.Sprintf(`{"type":"TOOL_CALL_END","toolCallId":"t%d"}`, r))
		for i := 0; i < deltas/4; i++ {
			evs = append(evs, fmt.Sprintf(`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/n","value":%d},{"op":"add","path":"/log/-","value":"r%d.%d"}]}`, r*1000+i, r, i))
		}
		evs = append(evs, fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":"r%d"}`, thread, r))
	}
	return evs
}

// restView reads the thread's REST view: its seq and document.
func restView(t *testing.T, base, tok, thread string) (uint64, json.RawMessage) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/threads/"+thread, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, nil
	}
	var v struct {
		Seq  uint64          `json:"seq"`
		View json.RawMessage `json:"view"`
	}
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Seq, v.View
}

// streamReader is one subscriber over real HTTP, folding what it reads as
// a client does: agui into a reducer.Thread, view mode into viewFold.
type streamReader struct {
	name   string
	view   bool
	r      *testsupport.SSEReader
	body   io.Closer
	agui   *reducer.Thread
	n      uint64
	vd     viewFold
	lastID string
	msgs   int
	ended  string // the end comment, if the server ended the stream
	dec    codec.Decoder
	ev     codec.Event
}

func openReader(t *testing.T, c *http.Client, base, tok, thread string, view bool) *streamReader {
	t.Helper()
	query := ""
	if view {
		query = "?mode=view"
	}
	return openReaderQuery(t, c, base, tok, thread, query, view)
}

func openReaderQuery(t *testing.T, c *http.Client, base, tok, thread, query string, view bool) *streamReader {
	t.Helper()
	url := base + "/v1/threads/" + thread + "/events" + query
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", res.Status)
	}
	t.Cleanup(func() { res.Body.Close() })
	return &streamReader{view: view, r: testsupport.NewSSEReader(res.Body), body: res.Body, agui: reducer.NewThread(thread)}
}

// readUntil reads until the last id is the seq target returns (the end of
// the frame at that seq; 0: not known yet, read on).
func (s *streamReader) readUntil(target func() uint64) error {
	for {
		if seq := target(); seq > 0 && s.lastID == fmt.Sprint(seq) {
			return nil
		}
		ev, err := s.r.Next()
		if err != nil {
			return fmt.Errorf("%s: read: %w (last id %q)", s.name, err, s.lastID)
		}
		if strings.HasPrefix(ev.Comment, "end") {
			s.ended = ev.Comment
			return fmt.Errorf("%s: the stream ended: %s", s.name, ev.Comment)
		}
		if ev.HasID {
			s.lastID = ev.ID
		}
		if !ev.HasData {
			continue
		}
		s.msgs++
		if s.view {
			if err := s.vd.apply([]byte(ev.Data)); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			continue
		}
		if err := s.dec.Decode([]byte(ev.Data), &s.ev); err != nil {
			return fmt.Errorf("%s: event does not decode: %w", s.name, err)
		}
		s.n++
		if res := s.agui.Apply(s.n, &s.ev); res.Fatal != nil || len(res.Warnings) > 0 {
			return fmt.Errorf("%s: event %s: fatal %v, warnings %v", s.name, ev.Data, res.Fatal, res.Warnings)
		}
	}
}

func seqIs(seq uint64) func() uint64 { return func() uint64 { return seq } }

// checkView compares what the reader holds with the REST view: the whole
// document in view mode (its seq aside), messages and state in agui mode
// (what an AG-UI stream restates).
func (s *streamReader) checkView(t *testing.T, want json.RawMessage) {
	t.Helper()
	var w map[string]json.RawMessage
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	keys := []string{"messages", "state"}
	if s.view {
		got = s.vd.doc()
		keys = keys[:0]
		for k := range w {
			if k != "seq" {
				keys = append(keys, k)
			}
		}
	} else if err := json.Unmarshal(s.agui.AppendView(nil), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if eq, err := jsondoc.Equal(got[k], w[k]); err != nil || !eq {
			t.Errorf("%s: %s differs from the REST view (err %v)\n got %.400s\nwant %.400s", s.name, k, err, got[k], w[k])
		}
	}
}

// viewFold applies view-mode payloads as web/static/viewdoc.js does (no
// window): a "view" replaces the document; changes replace the list
// ("allMessages"), apply message ops in order, replace ("state") or patch
// ("stateOps") the state, and set "warnings".
type viewFold struct {
	have  bool
	seq   uint64
	other map[string]json.RawMessage
	msgs  []map[string]any
	state *jsondoc.Doc
	dec   codec.Decoder
	ev    codec.Event
}

func (d *viewFold) apply(b []byte) error {
	var p struct {
		Type    string          `json:"type"`
		Seq     uint64          `json:"seq"`
		Prev    uint64          `json:"prev"`
		View    json.RawMessage `json:"view"`
		Changes json.RawMessage `json:"changes"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	switch p.Type {
	case "view":
		if err := d.setView(p.View); err != nil {
			return err
		}
	case "changes":
		if !d.have || p.Prev != d.seq {
			return fmt.Errorf("changes prev %d, held %d", p.Prev, d.seq)
		}
		if len(p.Changes) > 0 && string(p.Changes) != "null" {
			if err := d.applyChanges(p.Changes); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("payload type %q", p.Type)
	}
	d.seq = p.Seq
	return nil
}

func (d *viewFold) setView(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	d.msgs = nil
	if err := json.Unmarshal(m["messages"], &d.msgs); err != nil {
		return err
	}
	st, err := jsondoc.Parse(m["state"])
	if err != nil {
		return err
	}
	delete(m, "messages")
	delete(m, "state")
	d.other, d.state, d.have = m, st, true
	return nil
}

func (d *viewFold) applyChanges(raw json.RawMessage) error {
	var c map[string]json.RawMessage
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if v, ok := c["view"]; ok {
		return d.setView(v)
	}
	if all, ok := c["allMessages"]; ok {
		d.msgs = nil
		if err := json.Unmarshal(all, &d.msgs); err != nil {
			return err
		}
	} else if ops, ok := c["messages"]; ok {
		var list []struct {
			Index   int            `json:"index"`
			Op      string         `json:"op"`
			Text    string         `json:"text"`
			Message map[string]any `json:"message"`
		}
		if err := json.Unmarshal(ops, &list); err != nil {
			return err
		}
		for _, op := range list {
			switch {
			case op.Op == "append" && op.Index < len(d.msgs):
				s, ok := d.msgs[op.Index]["content"].(string)
				if !ok {
					return fmt.Errorf("append to message %d without string content", op.Index)
				}
				d.msgs[op.Index]["content"] = s + op.Text
			case op.Op == "add" && op.Index == len(d.msgs):
				d.msgs = append(d.msgs, op.Message)
			case op.Op == "replace" && op.Index < len(d.msgs):
				d.msgs[op.Index] = op.Message
			default:
				return fmt.Errorf("message op %q at %d of %d", op.Op, op.Index, len(d.msgs))
			}
		}
	}
	if st, ok := c["state"]; ok {
		if err := d.state.Set(st); err != nil {
			return err
		}
	} else if ops, ok := c["stateOps"]; ok {
		var patches []json.RawMessage
		if err := json.Unmarshal(ops, &patches); err != nil {
			return err
		}
		for _, p := range patches {
			ev := append([]byte(`{"type":"STATE_DELTA","delta":`), p...)
			if err := d.dec.Decode(append(ev, '}'), &d.ev); err != nil {
				return err
			}
			if err := d.state.Apply(d.ev.Patch); err != nil {
				return err
			}
		}
	}
	for _, k := range []string{"warnings", "status", "runs", "steps", "subagents", "error"} {
		if v, ok := c[k]; ok {
			d.other[k] = v
		}
	}
	return nil
}

// doc returns the held document's members.
func (d *viewFold) doc() map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(d.other)+2)
	for k, v := range d.other {
		m[k] = v
	}
	m["messages"], _ = json.Marshal(d.msgs)
	m["state"] = d.state.AppendJSON(nil)
	return m
}

// startBackpressureServer runs the real ingest and a fanout node whose
// connections have small kernel buffers, with the given queue bounds.
func startBackpressureServer(t *testing.T, queue, coalesce int) (*Server, string, jetstream.JetStream) {
	t.Helper()
	return startIngestServer(t, func(cfg *Config) {
		cfg.Hub.QueueBytes = queue
		cfg.Hub.CoalesceBytes = coalesce
	}, func(hs *httptest.Server) { hs.Listener = smallBufListener{hs.Listener} })
}

// startIngestServer is a fanout Server over a real NATS and ingest, with
// cfg changed by mod and its httptest server by prep before it starts;
// slow readers stop reading while the thread streams, so the write timeout
// is a minute.
func startIngestServer(t *testing.T, mod func(*Config), prep func(*httptest.Server)) (*Server, string, jetstream.JetStream) {
	t.Helper()
	ns := startNATS(t)
	const parts = 4
	startIngest(t, ns, parts)
	cfg := DefaultConfig()
	cfg.AuthKey = testKey
	cfg.Hub.Partitions = parts
	cfg.WriteTimeout = time.Minute
	mod(&cfg)
	s, err := New(connect(t, ns), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(s.Handler())
	prep(hs)
	hs.Start()
	t.Cleanup(func() { s.Drain(); hs.Close() })
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	return s, hs.URL, js
}

// publishFirst publishes a thread's first events and waits until the REST
// view shows them, so that the subscribers that join next find the thread.
func publishFirst(t *testing.T, js jetstream.JetStream, base, tok, thread string, evs ...string) uint64 {
	t.Helper()
	first := publishAll(t, js, thread, evs, 0)
	testsupport.WaitFor(t, 10*time.Second, "thread visible", func() bool { seq, _ := restView(t, base, tok, thread); return seq == first })
	return first
}

// publishAll publishes evs to the thread's subject, each acked before the
// next and pause apart (so that the pipeline frames them a few at a time,
// as live traffic), and returns the stream seq of the last.
func publishAll(t *testing.T, js jetstream.JetStream, thread string, evs []string, pause time.Duration) uint64 {
	t.Helper()
	subj, _ := wire.EventSubject("acme", thread)
	var last uint64
	for _, ev := range evs {
		time.Sleep(pause)
		ack, err := js.Publish(context.Background(), subj, []byte(ev))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	return last
}

// A subscriber that stops reading while a thread streams several hundred
// kilobytes in small frames — more than its queue holds — and then reads
// again gets its backlog consolidated instead of dropped: no resync, its
// stream not ended, far fewer messages than a subscriber that kept up, and
// in the end exactly the REST view. Both modes, over real HTTP, with the
// real ingest's frames.
func TestSlowSubscriberCoalesced(t *testing.T) {
	s, base, js := startBackpressureServer(t, 96<<10, 16<<10)
	const thread = "slow-thread"
	tok := token(t, "acme")
	evs := backpressureStream(thread, 4, 300)
	// The thread exists before the subscribers join.
	first := publishFirst(t, js, base, tok, thread, evs[0])

	client := smallBufClient()
	fastAgui := openReader(t, http.DefaultClient, base, tok, thread, false)
	fastView := openReader(t, http.DefaultClient, base, tok, thread, true)
	slowAgui := openReader(t, client, base, tok, thread, false)
	slowView := openReader(t, client, base, tok, thread, true)
	// A windowed one too (window.go), whose window holds the whole thread,
	// so that what it folds is the whole view.
	slowWindow := openReaderQuery(t, smallBufClient(), base, tok, thread, "?mode=view&window=1000", true)
	fastAgui.name, fastView.name, slowAgui.name, slowView.name, slowWindow.name = "fast agui", "fast view", "slow agui", "slow view", "slow windowed view"
	for _, r := range []*streamReader{fastAgui, fastView, slowAgui, slowView, slowWindow} {
		if err := r.readUntil(seqIs(first)); err != nil {
			t.Fatal(err)
		}
	}

	// The fast readers keep up while the slow ones read nothing.
	var target atomic.Uint64
	var wg sync.WaitGroup
	for _, r := range []*streamReader{fastAgui, fastView} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.readUntil(target.Load); err != nil {
				t.Error(err)
			}
		}()
	}
	last := publishAll(t, js, thread, evs[1:], 2*time.Millisecond)
	target.Store(last)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	testsupport.WaitFor(t, 10*time.Second, "REST view at the last event", func() bool { seq, _ := restView(t, base, tok, thread); return seq == last })
	_, want := restView(t, base, tok, thread)
	for _, r := range []*streamReader{slowAgui, slowView, slowWindow} {
		if err := r.readUntil(seqIs(last)); err != nil {
			t.Fatal(err)
		}
	}

	for _, r := range []*streamReader{fastAgui, fastView, slowAgui, slowView, slowWindow} {
		r.checkView(t, want)
	}
	m := s.Metrics()
	if n := counterValue(m.Drops.WithLabelValues(ReasonOverflow)); n != 0 {
		t.Errorf("%v queues dropped for overflow, want none", n)
	}
	for _, v := range []Variant{AguiSSE, ViewSSE} {
		if n := counterValue(m.Coalesced.WithLabelValues(v.String())); n == 0 {
			t.Errorf("%s: no backlog consolidated", v)
		}
	}
	if n := counterValue(m.CoalescedSaved.WithLabelValues(AguiSSE.String())); n == 0 {
		t.Errorf("consolidation saved no bytes")
	}
	if slowAgui.msgs*2 > fastAgui.msgs || slowView.msgs*2 > fastView.msgs || slowWindow.msgs*2 > fastView.msgs {
		t.Errorf("slow readers got %d (agui), %d (view) and %d (windowed view) messages, fast ones %d and %d: not consolidated",
			slowAgui.msgs, slowView.msgs, slowWindow.msgs, fastAgui.msgs, fastView.msgs)
	}
	for v := Variant(0); v < numVariants; v++ {
		t.Logf("%s: %v consolidations, %v bytes saved", v, counterValue(m.Coalesced.WithLabelValues(v.String())), counterValue(m.CoalescedSaved.WithLabelValues(v.String())))
	}
	t.Logf("%d events; messages read, fast/slow: agui %d/%d, view %d/%d (windowed %d)", len(evs), fastAgui.msgs, slowAgui.msgs, fastView.msgs, slowView.msgs, slowWindow.msgs)
}

// View-mode consolidation keeps the view: the change documents of the real
// ingest's frames for this file's stream and random streams
// (tools/streamgen), folded by a client (viewFold, the rules of
// web/static/viewdoc.js), give the same document whether a backlog of them
// was merged (mergeFrames; in two steps, as a window consolidated again
// with the frames after it) or not, compared where the merged backlog
// ends. Folding every frame as it is must give the REST view, which checks
// the fold itself.
func TestCoalesceChangesDifferential(t *testing.T) {
	ns := startNATS(t)
	const parts = 4
	startIngest(t, ns, parts)
	_, hs := newServer(t, connect(t, ns), func(c *Config) { c.Hub.Partitions = parts })
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	tok := token(t, "acme")
	// This file's stream: long runs of appends, tool call arguments and
	// state patches, with no restated view between run boundaries.
	streams := [][]string{backpressureStream("thread-1", 3, 200)}
	if _, err := exec.LookPath("node"); err == nil {
		gen := testsupport.Streamgen(t)
		for _, seed := range []string{"bpv-1", "bpv-2"} {
			out := testsupport.Generate(t, gen, "--seed", seed, "--events", "1500")
			var evs []string
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				evs = append(evs, l)
			}
			streams = append(streams, evs)
		}
	} else {
		t.Log("node not installed: the random streams of tools/streamgen are not checked")
	}
	for si, evs := range streams {
		thread := "thread-1"
		tenant := fmt.Sprintf("acme%d", si)
		tok = token(t, tenant)
		nc := connect(t, ns)
		var asm wire.Assembler
		frames := make(chan *frame, 1<<16)
		sub, err := nc.Subscribe(wire.ViewSubject(tenant, wire.EncodeThread(thread)), func(part *nats.Msg) {
			m, err := asm.Add(part)
			if err != nil || m == nil {
				return
			}
			if fr, err := decodeFrame(m); err == nil {
				frames <- fr
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		subj, _ := wire.EventSubject(tenant, thread)
		var last uint64
		for _, ev := range evs {
			time.Sleep(time.Millisecond / 2)
			ack, err := js.Publish(context.Background(), subj, []byte(ev))
			if err != nil {
				t.Fatal(err)
			}
			last = ack.Sequence
		}
		var all []*frame
		testsupport.WaitFor(t, 20*time.Second, "every frame", func() bool {
			for {
				select {
				case fr := <-frames:
					all = append(all, fr)
				default:
					return len(all) > 0 && all[len(all)-1].seq == last
				}
			}
		})
		_ = sub.Unsubscribe()
		for i := 1; i < len(all); i++ {
			if all[i].prev != all[i-1].seq {
				t.Fatalf("frame %d: prev %d after %d", i, all[i].prev, all[i-1].seq)
			}
		}
		fold := func(t *testing.T, payloads [][]byte) map[string]json.RawMessage {
			t.Helper()
			// From the view of a thread not yet written, which its first
			// frame continues.
			var vd viewFold
			if err := vd.setView(reducer.NewThread(thread).AppendView(nil)); err != nil {
				t.Fatal(err)
			}
			vd.seq = all[0].prev
			for i, p := range payloads {
				if err := vd.apply(p); err != nil {
					t.Fatalf("payload %d: %v\n%.300s", i, err, p)
				}
			}
			return vd.doc()
		}
		payloadsOf := func(frames []*frame) [][]byte {
			var out [][]byte
			for _, fr := range frames {
				out = append(out, changesPayload(fr))
			}
			return out
		}
		want := fold(t, payloadsOf(all))
		_, rest := restView(t, hs.URL, tok, thread)
		var rv map[string]json.RawMessage
		if err := json.Unmarshal(rest, &rv); err != nil {
			t.Fatal(err)
		}
		for k, v := range rv {
			if k == "seq" {
				continue
			}
			if eq, err := jsondoc.Equal(want[k], v); err != nil || !eq {
				t.Fatalf("stream %d: the fold of every frame differs from the REST view in %s\n got %.300s\nwant %.300s", si, k, want[k], v)
			}
		}
		// A windowed subscriber's client (viewJoiner: messages from its
		// base on, restatements windowed) from the thread not yet written.
		foldWindow := func(t *testing.T, payloads [][]byte) viewJoiner {
			t.Helper()
			v := viewJoiner{seq: all[0].prev}
			for _, p := range payloads {
				v.apply(t, string(p))
			}
			return v
		}
		windowed := func(frames []*frame, w int) [][]byte {
			var out [][]byte
			for _, fr := range frames {
				out = append(out, fr.encoding(ViewWS, w)...)
			}
			return out
		}
		rng := rand.New(rand.NewPCG(uint64(si), 11))
		in, out := 0, 0
		for trial := 0; trial < 40; trial++ {
			j := rng.IntN(len(all) - 1)
			k := j + 2 + rng.IntN(min(len(all)-j-1, 200))
			mid := j + 1 + rng.IntN(k-j-1)
			docs, err := mergeFrames(nil, all[j:mid])
			if err != nil {
				t.Fatal(err)
			}
			if docs, err = mergeFrames(docs, all[mid:k]); err != nil {
				t.Fatal(err)
			}
			merged, _ := encodeDocs(docs, ViewWS, 0)
			// Compared where the window ends: later frames restate what
			// they change, and would hide a wrong merge.
			wantK := fold(t, payloadsOf(all[:k]))
			got := fold(t, append(payloadsOf(all[:j]), merged...))
			for key, w := range wantK {
				if eq, err := jsondoc.Equal(got[key], w); err != nil || !eq {
					t.Fatalf("stream %d: frames %d..%d merged (%d documents) give another %s\n got %.300s\nwant %.300s", si, j, k, len(merged), key, got[key], w)
				}
			}
			// The same backlog for windowed subscribers: merged, then
			// windowed as their frames are.
			for _, w := range []int{1, 3} {
				want := foldWindow(t, windowed(all[:k], w))
				msgs, _ := encodeDocs(docs, ViewWS, w)
				got := foldWindow(t, append(windowed(all[:j], w), msgs...))
				if got.seq != want.seq || got.base != want.base || got.count != want.count || got.status != want.status || !reflect.DeepEqual(got.msgs, want.msgs) {
					t.Fatalf("stream %d, window %d: frames %d..%d merged give seq %d, messages from %d of %d, status %q:\n%.300v\nwant seq %d, from %d of %d, status %q:\n%.300v",
						si, w, j, k, got.seq, got.base, got.count, got.status, got.msgs, want.seq, want.base, want.count, want.status, want.msgs)
				}
			}
			in, out = in+k-j, out+len(merged)
		}
		// The whole backlog queued, frame by frame, for a windowed
		// subscriber that takes nothing until the end, of a hub whose
		// high-water mark is small: what its windows keep for the next
		// consolidation (their documents, unwindowed) stays within
		// maxPinned × CoalesceBytes, its windows being sealed past it, and
		// what it takes at the end folds as the frames do.
		const w = 3
		h := newHub(nc, HubConfig{QueueBytes: 1 << 30, CoalesceBytes: 256}, nil, nil)
		defer h.Close()
		f := &feed{hub: h, subs: make(map[*subscriber]struct{}), ring: newRing(16)}
		slow := &subscriber{feed: f, variant: ViewWS, window: w, limit: h.cfg.QueueBytes, nextCoalesce: h.cfg.CoalesceBytes,
			signal: make(chan struct{}, 1), state: stLive, last: all[0].prev}
		f.subs[slow] = struct{}{}
		bound := maxPinned * h.cfg.CoalesceBytes
		held, sealed := 0, map[*coalesced]bool{}
		for _, fr := range all {
			f.mu.Lock()
			f.deliverLocked(slow, fr)
			f.mu.Unlock()
			slow.mu.Lock()
			for _, it := range slow.queue {
				if co := it.co; co != nil {
					_, kept := encodeDocs(co.docs, ViewWS, 0)
					held = max(held, kept)
					if co.sealed {
						sealed[co] = true
					}
				}
			}
			slow.mu.Unlock()
		}
		items, _, resync := slow.Take(nil)
		if resync != "" {
			t.Fatalf("stream %d: the windowed subscriber was resynchronised: %s", si, resync)
		}
		var taken [][]byte
		for _, it := range items {
			taken = append(taken, it.b)
		}
		wantW := foldWindow(t, windowed(all, w))
		got := foldWindow(t, taken)
		if want := wantW; got.seq != want.seq || got.base != want.base || got.count != want.count || got.status != want.status || !reflect.DeepEqual(got.msgs, want.msgs) {
			t.Fatalf("stream %d: a windowed subscriber's consolidated backlog gives seq %d, messages from %d of %d, status %q:\n%.300v\nwant seq %d, from %d of %d, status %q:\n%.300v",
				si, got.seq, got.base, got.count, got.status, got.msgs, want.seq, want.base, want.count, want.status, want.msgs)
		}
		if held > bound {
			t.Errorf("stream %d: a windowed subscriber's window kept %d bytes of documents, past the bound of %d", si, held, bound)
		}
		if len(sealed) < 2 {
			t.Errorf("stream %d: %d windows sealed: the bound was not reached", si, len(sealed))
		}
		t.Logf("stream %d: a windowed subscriber's backlog of %d frames: %d messages taken, %d windows sealed, at most %d bytes of documents kept", si, len(all), len(items), len(sealed), held)
		t.Logf("stream %d: %d events, %d frames; %d change documents merged into %d", si, len(evs), len(all), in, out)
		if out*4 > in {
			t.Errorf("stream %d: merged %d documents into %d", si, in, out)
		}
	}
}

// When even the consolidated backlog exceeds QueueBytes — a reader that
// stopped while a thread streams messages that nothing folds together —
// the subscriber is resynchronised as without consolidation: its agui
// stream ends with reason=resync.
func TestCoalescedStillOverflows(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, nc, "acme", "overflowing")
	th.publishEvents(t, `{"type":"RUN_STARTED","threadId":"overflowing","runId":"r1"}`)
	cfg := DefaultConfig()
	cfg.AuthKey = testKey
	cfg.Hub.QueueBytes = 32 << 10
	cfg.Hub.CoalesceBytes = 8 << 10
	cfg.WriteTimeout = time.Minute
	s, err := New(connect(t, ns), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Listener = smallBufListener{hs.Listener}
	hs.Start()
	t.Cleanup(func() { s.Drain(); hs.Close() })
	r := openReader(t, smallBufClient(), hs.URL, token(t, "acme"), "overflowing", false)
	r.name = "stalled"
	if err := r.readUntil(seqIs(th.seq)); err != nil {
		t.Fatal(err)
	}
	// Whole messages of 2 KB each, every one its own: consolidation joins
	// nothing.
	pad := strings.Repeat("x", 2000)
	for i := 0; i < 120; i++ {
		th.publishEvents(t, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m%d","role":"assistant","delta":"%d %s"}`, i, i, pad))
	}
	m := s.Metrics()
	testsupport.WaitFor(t, 10*time.Second, "a queue dropped for overflow", func() bool {
		return counterValue(m.Drops.WithLabelValues(ReasonOverflow)) == 1
	})
	if n := counterValue(m.Coalesced.WithLabelValues(AguiSSE.String())); n == 0 {
		t.Errorf("no consolidation was tried before the drop")
	}
	err = r.readUntil(seqIs(th.seq))
	if err == nil || !strings.Contains(r.ended, "reason=resync") {
		t.Fatalf("the stream did not end for a resync: %v", err)
	}
}
