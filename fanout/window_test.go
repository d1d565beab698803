package fanout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/longthread"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// startNATSMaxPayload is startNATS with another max payload.
func startNATSMaxPayload(t testing.TB, maxPayload int32) *natstest.Server {
	t.Helper()
	return natstest.Start(t, natstest.MaxPayload(maxPayload), natstest.MaxPending(4*int64(maxPayload)))
}

// storedThread is a thread published to JetStream for the real ingest, with
// everything needed to reduce it offline: every event with the stream seq
// it was stored at.
type storedThread struct {
	tenant, id string
	gen        longthread.Gen
	js         jetstream.JetStream
	mu         sync.Mutex
	events     []json.RawMessage
	seqs       []uint64
}

func newStoredThread(t testing.TB, js jetstream.JetStream, tenant, id string) *storedThread {
	return &storedThread{tenant: tenant, id: id, gen: longthread.Gen{Thread: id, RunLen: 50}, js: js}
}

// publish stores evs in JSONL batches of up to 500 events.
func (lt *storedThread) publish(t testing.TB, evs []json.RawMessage) {
	t.Helper()
	subj, err := wire.EventSubject(lt.tenant, lt.id)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(evs); {
		n := min(500, len(evs)-i)
		var body [][]byte
		for _, e := range evs[i : i+n] {
			body = append(body, e)
		}
		msg := &nats.Msg{Subject: subj, Data: bytes.Join(body, []byte("\n")), Header: nats.Header{wire.HeaderBatch: {strconv.Itoa(n)}}}
		ack, err := lt.js.PublishMsg(context.Background(), msg)
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		lt.mu.Lock()
		for _, e := range evs[i : i+n] {
			lt.events = append(lt.events, e)
			lt.seqs = append(lt.seqs, ack.Sequence)
		}
		lt.mu.Unlock()
		i += n
	}
}

// lastSeq is the stream seq of the last event published.
func (lt *storedThread) lastSeq() uint64 {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.seqs[len(lt.seqs)-1]
}

// offline reduces every event published so far with the reducer alone, as
// `threadcast reduce` does.
func (lt *storedThread) offline(t testing.TB) *reducer.Thread {
	t.Helper()
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return reduceEvents(t, lt.id, lt.events, lt.seqs)
}

// reduceEvents applies events (with their seqs) to a fresh Thread the way
// the pipeline treats each one.
func reduceEvents(t testing.TB, id string, events []json.RawMessage, seqs []uint64) *reducer.Thread {
	t.Helper()
	th := reducer.NewThread(id)
	var dec codec.Decoder
	var ev codec.Event
	for i, raw := range events {
		seq := seqs[i]
		err := dec.Decode(bytes.Clone(raw), &ev)
		for _, w := range dec.Warnings() {
			th.Warn(seq, reducer.CodecWarning(seq, w))
		}
		if err != nil {
			var ce *codec.Error
			if errors.As(err, &ce) && ce.Verdict == codec.Drop {
				th.Warn(seq, reducer.CodecWarning(seq, ce))
				continue
			}
			th.Reject(seq, err)
			continue
		}
		th.Apply(seq, &ev)
	}
	return th
}

// waitApplied waits until the pipeline's view of lt is at its last seq.
func waitApplied(t testing.TB, hsURL, tok string, lt *storedThread) {
	t.Helper()
	want := strconv.FormatUint(lt.lastSeq(), 10)
	testsupport.WaitFor(t, 60*time.Second, "the pipeline at seq "+want, func() bool {
		resp, err := authGet(hsURL+"/v1/threads/"+url.PathEscape(lt.id)+"?window=1", tok)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get(wire.HeaderSeq) == want
	})
}

func authGet(u, tok string) (*http.Response, error) {
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	return http.DefaultClient.Do(req)
}

func getJSON(t testing.TB, u, tok string, wantStatus int, v any) http.Header {
	t.Helper()
	resp, err := authGet(u, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("GET %s: %d %s, want %d", u, resp.StatusCode, b, wantStatus)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %.200s", u, err, b)
		}
	}
	return resp.Header
}

// decodeMessages decodes a JSON array of messages into comparable values.
func decodeMessages(t testing.TB, raw []byte) []any {
	t.Helper()
	var out []any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("messages: %v: %.200s", err, raw)
	}
	return out
}

// payloadSource is one stream connection: SSE data messages or WebSocket
// messages, one payload each.
type payloadSource interface {
	next(ctx context.Context) (string, error)
}

type ssePayloads struct{ c *sseClient }

func (s ssePayloads) next(ctx context.Context) (string, error) {
	stop := context.AfterFunc(ctx, s.c.close) // a test that waits too long fails, not hangs
	defer stop()
	for {
		m, err := s.c.next()
		if err != nil {
			return "", err
		}
		if m.data != "" {
			return m.data, nil
		}
	}
}

type wsPayloads struct{ c *websocket.Conn }

func (w wsPayloads) next(ctx context.Context) (string, error) {
	_, b, err := w.c.Read(ctx)
	return string(b), err
}

func openStream(t *testing.T, base, path, tok string, ws bool) payloadSource {
	t.Helper()
	if !ws {
		return ssePayloads{openSSE(t, base+path, tok, nil)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+path,
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return wsPayloads{c}
}

// aguiJoiner is an AG-UI consumer of a windowed stream: the events it
// receives are applied to a fresh reducer, which must accept every one.
type aguiJoiner struct {
	th      *reducer.Thread
	dec     codec.Decoder
	n       uint64
	firstID string // the first message of the join's MESSAGES_SNAPSHOT
	join    int    // bytes received up to the first live event
	joined  bool
	maxLive int // the largest payload after the join
}

func (a *aguiJoiner) apply(t testing.TB, data string) (typ, runID string) {
	t.Helper()
	var head struct {
		Type     string            `json:"type"`
		RunID    string            `json:"runId"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(data), &head); err != nil {
		t.Fatalf("bad event %.200s: %v", data, err)
	}
	if a.th == nil {
		a.th = reducer.NewThread("joiner")
	}
	if head.Type == "MESSAGES_SNAPSHOT" && !a.joined && len(head.Messages) > 0 {
		var m struct{ ID string }
		_ = json.Unmarshal(head.Messages[0], &m)
		a.firstID = m.ID
	}
	if !a.joined {
		a.join += len(data)
	} else {
		a.maxLive = max(a.maxLive, len(data))
	}
	a.n++
	var ev codec.Event
	if err := a.dec.Decode([]byte(data), &ev); err != nil {
		t.Fatalf("event %.200s: %v", data, err)
	}
	if res := a.th.Apply(a.n, &ev); res.Fatal != nil || len(res.Warnings) > 0 {
		t.Fatalf("the joiner refuses %.200s: %v %v", data, res.Fatal, res.Warnings)
	}
	return head.Type, head.RunID
}

// viewJoiner holds a windowed view document, applying the view-mode
// payloads as a dashboard does (fanout/window.go's NOTE): messages from
// base on.
type viewJoiner struct {
	base    int
	msgs    []any
	status  string
	seq     uint64
	count   int // the whole view's message count, as last restated
	maxLive int
	payload int
}

func (v *viewJoiner) apply(t testing.TB, data string) {
	t.Helper()
	var p struct {
		Type    string          `json:"type"`
		Seq     uint64          `json:"seq"`
		Prev    uint64          `json:"prev"`
		View    json.RawMessage `json:"view"`
		Changes json.RawMessage `json:"changes"`
	}
	if err := json.Unmarshal([]byte(data), &p); err != nil {
		t.Fatalf("bad payload %.200s: %v", data, err)
	}
	v.payload++
	switch p.Type {
	case "view":
		v.restate(t, p.View, true)
	case "changes":
		if v.payload > 1 {
			v.maxLive = max(v.maxLive, len(data))
		}
		if p.Prev != v.seq {
			t.Fatalf("gap: prev %d, held %d", p.Prev, v.seq)
		}
		var ch struct {
			Messages []struct {
				Index   int             `json:"index"`
				Op      string          `json:"op"`
				Message json.RawMessage `json:"message"`
				Text    string          `json:"text"`
			} `json:"messages"`
			AllMessages  json.RawMessage `json:"allMessages"`
			MessagesFrom int             `json:"messagesFrom"`
			MessageCount int             `json:"messageCount"`
			View         json.RawMessage `json:"view"`
			Status       *string         `json:"status"`
			Runs         []any           `json:"runs"`
			RunsFrom     *int            `json:"runsFrom"`
			RunCount     int             `json:"runCount"`
		}
		if len(p.Changes) > 0 && string(p.Changes) != "null" {
			if err := json.Unmarshal(p.Changes, &ch); err != nil {
				t.Fatal(err)
			}
		}
		if ch.AllMessages != nil {
			v.base, v.msgs, v.count = ch.MessagesFrom, decodeMessages(t, ch.AllMessages), ch.MessageCount
		}
		for _, c := range ch.Messages {
			i := c.Index - v.base
			switch {
			case i < 0:
				continue // a message this client does not hold
			case c.Op == "add":
				if i != len(v.msgs) {
					t.Fatalf("add at %d (local %d), holding %d", c.Index, i, len(v.msgs))
				}
				var m any
				_ = json.Unmarshal(c.Message, &m)
				v.msgs = append(v.msgs, m)
				v.count++
			case c.Op == "replace":
				var m any
				_ = json.Unmarshal(c.Message, &m)
				v.msgs[i] = m
			case c.Op == "append":
				m := v.msgs[i].(map[string]any)
				m["content"] = m["content"].(string) + c.Text
			}
		}
		if ch.View != nil {
			v.restate(t, ch.View, false)
		}
		if ch.Status != nil {
			v.status = *ch.Status
		}
		if ch.Runs != nil {
			// Run-level members restated: windowed, they hold the newest
			// runs only.
			if ch.RunsFrom == nil || *ch.RunsFrom+len(ch.Runs) != ch.RunCount {
				t.Fatalf("a windowed subscriber got %d runs restated (runsFrom %v of %d)", len(ch.Runs), ch.RunsFrom, ch.RunCount)
			}
		}
	default:
		t.Fatalf("unknown payload %.200s", data)
	}
	v.seq = p.Seq
}

// restate installs a windowed view document; whole (a "view" payload)
// replaces everything held, else what is held before the document's
// messages is kept.
func (v *viewJoiner) restate(t testing.TB, raw json.RawMessage, whole bool) {
	t.Helper()
	var doc struct {
		Messages     json.RawMessage `json:"messages"`
		MessagesFrom *int            `json:"messagesFrom"`
		MessageCount int             `json:"messageCount"`
		Status       string          `json:"status"`
		Runs         []any           `json:"runs"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.MessagesFrom == nil {
		t.Fatalf("a windowed subscriber got a whole view (%d bytes)", len(raw))
	}
	msgs := decodeMessages(t, doc.Messages)
	from := *doc.MessagesFrom
	if !whole && from > v.base && from-v.base <= len(v.msgs) {
		v.msgs = append(v.msgs[:from-v.base:from-v.base], msgs...)
	} else {
		v.base, v.msgs = from, msgs
	}
	v.status, v.count = doc.Status, doc.MessageCount
}

// TestWindowedJoins: a 10k-message thread, reduced by the real ingest.
// Windowed joins in both modes over SSE and WebSocket hold the newest
// messages of the offline reduction, continue live to its end, and send no
// more than the window at the join and after; the REST view and the
// messages pages agree with it; a late windowed join while the thread
// streams ends equal to the offline reduction.
//
// The frames that restate the runs (at each run boundary) are windowed for
// them (window.go).
func TestWindowedJoins(t *testing.T) { windowedJoins(t, 10_000) }

func windowedJoins(t *testing.T, size int) {
	ns := startNATS(t)
	const parts = 8
	startIngest(t, ns, parts)
	fnc := connect(t, ns)
	_, hs := newServer(t, fnc, func(c *Config) {
		c.Hub.Partitions = parts
		// A late joiner whose snapshot is ahead of the feed waits this long
		// for the frames in flight before adopting the snapshot's seq;
		// adopting drops them and resynchronises the live subscribers
		// behind it, which ends their agui streams (with a resume hint;
		// this test's agui consumers do not reconnect). Under -race the
		// frames of this test (the ones restating the view are 1.5 MB, in
		// parts) can take longer than newServer's 100 ms to get through
		// the feed.
		c.Hub.JoinWait = 5 * time.Second
	})
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	tok := token(t, "acme")
	lt := newStoredThread(t, js, "acme", "long one")
	// One run for the whole thread: the run boundary at the end is enough
	// to check that windowed subscribers get the runs restated windowed.
	lt.gen.RunLen = 1 << 30
	lt.publish(t, lt.gen.Messages(size)) // ends inside an open run
	waitApplied(t, hs.URL, tok, lt)
	base := "/v1/threads/" + url.PathEscape(lt.id)

	t.Run("rest", func(t *testing.T) { checkREST(t, hs.URL, base, tok, lt) })

	const window = 50
	want := lt.offline(t)
	from := want.WindowStart(window)
	type joiner struct {
		name string
		src  payloadSource
		agui *aguiJoiner
		view *viewJoiner
	}
	var joiners []*joiner
	for _, mode := range []string{"agui", "view"} {
		for _, ws := range []bool{false, true} {
			j := &joiner{name: fmt.Sprintf("%s ws=%v", mode, ws),
				src: openStream(t, hs.URL, base+"/events?mode="+mode+"&window="+strconv.Itoa(window), tok, ws)}
			if mode == "agui" {
				j.agui = &aguiJoiner{}
			} else {
				j.view = &viewJoiner{}
			}
			joiners = append(joiners, j)
		}
	}
	// The joins: each brings exactly the newest messages.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+time.Duration(size)*time.Millisecond)
	defer cancel()
	wantMsgs := decodeMessages(t, want.AppendMessages(nil))
	for _, j := range joiners {
		if j.view != nil {
			data, err := j.src.next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			j.view.apply(t, data)
			if j.view.base != from || !reflect.DeepEqual(j.view.msgs, wantMsgs[from:]) || j.view.count != len(wantMsgs) {
				t.Fatalf("%s: joined with %d messages from %d of %d; want %d from %d of %d", j.name, len(j.view.msgs), j.view.base, j.view.count, len(wantMsgs)-from, from, len(wantMsgs))
			}
			if len(data) > 64<<10 {
				t.Errorf("%s: the join is %d bytes", j.name, len(data))
			}
			continue
		}
		for j.agui.th == nil || j.agui.th.Status() != reducer.StatusRunning || j.agui.th.MessageCount() < len(wantMsgs)-from {
			data, err := j.src.next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			j.agui.apply(t, data)
		}
		j.agui.joined = true
		if got := decodeMessages(t, j.agui.th.AppendMessages(nil)); !reflect.DeepEqual(got, wantMsgs[from:]) {
			t.Fatalf("%s: joined with %d messages; want the %d from %d", j.name, len(got), len(wantMsgs)-from, from)
		}
		if j.agui.join > 64<<10 {
			t.Errorf("%s: the join is %d bytes", j.name, j.agui.join)
		}
	}

	// Live: the thread goes on streaming; a late windowed join comes in
	// the middle of it. Every stream is read all along, each by its own
	// subtest (a stream nobody reads would be cut by the fanout's write
	// timeout), until the thread's end: the last run finished, in view
	// mode with the final message count.
	var live [][]json.RawMessage
	for i := 0; i < 20; i++ {
		live = append(live, lt.gen.Messages(25))
	}
	live = append(live, lt.gen.Finish())
	lastRun := lt.gen.RunID()
	var all []json.RawMessage
	all = append(all, lt.events...)
	for _, b := range live {
		all = append(all, b...)
	}
	fake := make([]uint64, len(all))
	for i := range fake {
		fake[i] = uint64(i + 1)
	}
	wantCount := reduceEvents(t, lt.id, all, fake).MessageCount()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, b := range live {
			lt.publish(t, b)
		}
	}()
	late := &joiner{name: "late agui sse", src: openStream(t, hs.URL, base+"/events?window=7", tok, false), agui: &aguiJoiner{}}
	lateView := &joiner{name: "late view ws", src: openStream(t, hs.URL, base+"/events?mode=view&window=7", tok, true), view: &viewJoiner{}}
	t.Run("live", func(t *testing.T) {
		for _, j := range append(joiners, late, lateView) {
			t.Run(j.name, func(t *testing.T) {
				t.Parallel()
				last := ""
				for {
					data, err := j.src.next(ctx)
					if err != nil {
						at := "?"
						if resp, err := authGet(hs.URL+base+"?window=1", tok); err == nil {
							at = resp.Header.Get(wire.HeaderSeq)
							resp.Body.Close()
						}
						t.Fatalf("%v (the pipeline at seq %s of %d; the fanout's NATS connection reconnected %d times; the last payload: %.300s)", err, at, lt.lastSeq(), fnc.Stats().Reconnects, last)
					}
					last = data
					if j.view != nil {
						j.view.apply(t, data)
						if j.view.status == "finished" && j.view.count == wantCount {
							return
						}
						continue
					}
					if typ, run := j.agui.apply(t, data); typ == "RUN_FINISHED" && run == lastRun && j.agui.th.Status() == reducer.StatusFinished {
						return
					}
				}
			})
		}
	})
	<-done
	if t.Failed() {
		return
	}
	final := lt.offline(t)
	finalMsgs := decodeMessages(t, final.AppendMessages(nil))
	if len(finalMsgs) != wantCount {
		t.Fatalf("the offline reduction has %d messages, the events %d", len(finalMsgs), wantCount)
	}
	for _, j := range append(joiners, late, lateView) {
		if j.view != nil {
			if j.view.seq != lt.lastSeq() || !reflect.DeepEqual(j.view.msgs, finalMsgs[j.view.base:]) || j.view.status != final.Status().String() {
				t.Fatalf("%s: ended at seq %d with %d messages from %d (%s); the offline reduction is at %d with %d (%s)", j.name, j.view.seq, len(j.view.msgs), j.view.base, j.view.status, lt.lastSeq(), len(finalMsgs), final.Status())
			}
			if j.view.maxLive > 64<<10 {
				t.Errorf("%s: a live payload of %d bytes", j.name, j.view.maxLive)
			}
			continue
		}
		got := decodeMessages(t, j.agui.th.AppendMessages(nil))
		first := -1
		for i, m := range finalMsgs {
			if m.(map[string]any)["id"] == j.agui.firstID {
				first = i
				break
			}
		}
		if first < 0 || !reflect.DeepEqual(got, finalMsgs[first:]) {
			t.Fatalf("%s: ended with %d messages from %q; the offline reduction has %d (from index %d)", j.name, len(got), j.agui.firstID, len(finalMsgs), first)
		}
		if j.agui.maxLive > 64<<10 {
			t.Errorf("%s: a live event of %d bytes", j.name, j.agui.maxLive)
		}
	}
}

// checkREST: the windowed REST view, the messages pages back to the first
// message, and every bound and error path.
func checkREST(t *testing.T, hsURL, base, tok string, lt *storedThread) {
	want := lt.offline(t)
	wantMsgs := decodeMessages(t, want.AppendMessages(nil))
	var v struct {
		Seq  uint64          `json:"seq"`
		View json.RawMessage `json:"view"`
	}
	h := getJSON(t, hsURL+base+"?window=50", tok, http.StatusOK, &v)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(v.View, &doc); err != nil {
		t.Fatal(err)
	}
	wantDoc := want.AppendWindowView(nil, 50)
	var wantMap map[string]json.RawMessage
	_ = json.Unmarshal(wantDoc, &wantMap)
	for k := range wantMap {
		var a, b any
		_ = json.Unmarshal(doc[k], &a)
		_ = json.Unmarshal(wantMap[k], &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("windowed REST view: %s is %.200s, the offline window's %.200s", k, doc[k], wantMap[k])
		}
	}
	if v.Seq != want.Seq() || h.Get(wire.HeaderSeq) != strconv.FormatUint(want.Seq(), 10) || h.Get("ETag") != fmt.Sprintf(`"%dw50"`, want.Seq()) {
		t.Fatalf("windowed REST view at seq %d (Tc-Seq %s, ETag %s); want %d", v.Seq, h.Get(wire.HeaderSeq), h.Get("ETag"), want.Seq())
	}

	// Pages back to the first message.
	var got []any
	before := ""
	for pages := 0; ; pages++ {
		if pages > len(wantMsgs)/1000+2 {
			t.Fatal("paging does not end")
		}
		var p struct {
			Seq      uint64          `json:"seq"`
			Messages json.RawMessage `json:"messages"`
			First    int             `json:"first"`
			Total    int             `json:"total"`
			Before   *string         `json:"before"`
		}
		u := hsURL + base + "/messages?limit=1000"
		if before != "" {
			u += "&before=" + url.QueryEscape(before)
		}
		getJSON(t, u, tok, http.StatusOK, &p)
		if p.Seq != want.Seq() || p.Total != len(wantMsgs) {
			t.Fatalf("page before %q at seq %d of %d messages; want %d of %d", before, p.Seq, p.Total, want.Seq(), len(wantMsgs))
		}
		got = append(decodeMessages(t, p.Messages), got...)
		if p.Before == nil {
			if p.First != 0 {
				t.Fatalf("page from %d without a cursor", p.First)
			}
			break
		}
		before = *p.Before
	}
	if !reflect.DeepEqual(got, wantMsgs) {
		t.Fatalf("the pages hold %d messages; the offline reduction %d (or they differ)", len(got), len(wantMsgs))
	}
	var newest struct{ Messages json.RawMessage }
	getJSON(t, hsURL+base+"/messages", tok, http.StatusOK, &newest) // the default limit
	if msgs := decodeMessages(t, newest.Messages); !reflect.DeepEqual(msgs, wantMsgs[len(wantMsgs)-50:]) {
		t.Fatalf("the default page holds %d messages, not the newest 50", len(msgs))
	}

	// Bounds and errors.
	for _, tc := range []struct {
		path, tok string
		status    int
		reason    string
	}{
		{base + "?window=0", tok, 400, "bad_window"},
		{base + "?window=1001", tok, 400, "bad_window"},
		{base + "?window=x", tok, 400, "bad_window"},
		{base + "/events?window=-2", tok, 400, "bad_window"},
		{base + "/events?mode=view&window=1001", tok, 400, "bad_window"},
		{base + "/messages?limit=0", tok, 400, "bad_limit"},
		{base + "/messages?limit=1001", tok, 400, "bad_limit"},
		{base + "/messages?before=" + strings.Repeat("x", 1025), tok, 400, "bad_before"},
		{base + "/messages?before=no-such-message", tok, 404, "message_not_found"},
		{"/v1/threads/never-seen/messages", tok, 404, "not_found"},
		// Another tenant sees no such thread; a token for other threads
		// is refused.
		{base + "/messages", token(t, "other"), 404, "not_found"},
		{base + "?window=5", token(t, "other"), 404, "not_found"},
		{base + "/messages", token(t, "acme", "another thread"), 403, "forbidden"},
		{base + "/messages", "", 401, "missing_token"},
	} {
		var e struct {
			Error  string `json:"error"`
			Detail string `json:"detail"`
		}
		getJSON(t, hsURL+tc.path, tc.tok, tc.status, &e)
		if e.Error != tc.reason {
			t.Errorf("GET %.80s: error %q, want %q", tc.path, e.Error, tc.reason)
		}
		if tc.status == 400 && e.Detail == "" {
			t.Errorf("GET %.80s: no detail for people", tc.path)
		}
	}
}

// TestInteropHttpAgentLongThread: the reference AG-UI client (@ag-ui/client
// HttpAgent) joins a finished 10k-message thread, whole and with
// ?window=50, and ends with the offline reduction's messages (all of them,
// or the window's) and state. The whole join of this thread is over the
// server's 1 MiB max payload: it travels in parts.
func TestInteropHttpAgentLongThread(t *testing.T) {
	// @ag-ui/client is the oracle's locked package set (tools/oracle).
	dir := testsupport.OracleDir(t)
	node := testsupport.Node(t)
	ns := startNATS(t)
	const parts = 8
	startIngest(t, ns, parts)
	_, hs := newServer(t, connect(t, ns), func(c *Config) { c.Hub.Partitions = parts })
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	tok := token(t, "acme")
	lt := newStoredThread(t, js, "acme", "interop-long")
	lt.publish(t, lt.gen.Messages(10_000))
	lt.publish(t, []json.RawMessage{json.RawMessage(`{"type":"STATE_SNAPSHOT","snapshot":{"done":true,"n":10000}}`)})
	lt.publish(t, lt.gen.Finish())
	waitApplied(t, hs.URL, tok, lt)
	want := lt.offline(t)
	wantMsgs := decodeMessages(t, want.AppendMessages(nil))
	var wantState any
	_ = json.Unmarshal(want.AppendState(nil), &wantState)
	for _, tc := range []struct {
		name  string
		query string
		from  int
	}{{"whole", "", 0}, {"window 50", "?window=50", want.WindowStart(50)}} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(node, "testdata/httpagent.cjs", dir, hs.URL+"/v1/threads/"+lt.id+"/events"+tc.query, tok, lt.id)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
			err := cmd.Wait()
			stop()
			if err != nil {
				t.Fatalf("HttpAgent: %v\nstdout: %.500s\nstderr: %.500s", err, stdout.String(), stderr.String())
			}
			var got struct {
				Messages []any `json:"messages"`
				State    any   `json:"state"`
				Error    string
			}
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || got.Error != "" {
				t.Fatalf("HttpAgent output %.500s (%v)", stdout.String(), err)
			}
			if !reflect.DeepEqual(got.Messages, wantMsgs[tc.from:]) {
				t.Fatalf("HttpAgent ends with %d messages; the offline reduction has %d from %d", len(got.Messages), len(wantMsgs)-tc.from, tc.from)
			}
			if !reflect.DeepEqual(got.State, wantState) {
				t.Fatalf("HttpAgent state %v, offline %v", got.State, wantState)
			}
		})
	}
}

// TestWindowedResyncKeepsWindow: a windowed view-mode subscriber that
// misses a frame is resynchronised with a snapshot of its own window; the
// feed caches snapshots per window, so a second joiner of the same window
// at the same seq asks the pipeline nothing, and one of another window (or
// none) asks for its own.
func TestWindowedResyncKeepsWindow(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "wgap")
	srv, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	th.publish(t, "a;")
	v := openSSE(t, hs.URL+"/v1/threads/wgap/events?mode=view&window=5", tok, nil)
	if m, err := v.next(); err != nil || !strings.Contains(m.data, `"type":"view","seq":2`) {
		t.Fatalf("first view: %+v %v", m, err)
	}
	v2 := openSSE(t, hs.URL+"/v1/threads/wgap/events?mode=view&window=5", tok, nil)
	if m, err := v2.next(); err != nil || !strings.Contains(m.data, `"type":"view","seq":2`) {
		t.Fatalf("second joiner's view: %+v %v", m, err)
	}
	whole := openSSE(t, hs.URL+"/v1/threads/wgap/events?mode=view", tok, nil)
	if m, err := whole.next(); err != nil || !strings.Contains(m.data, `"type":"view","seq":2`) {
		t.Fatalf("unwindowed view: %+v %v", m, err)
	}
	th.mu.Lock()
	got := append([]int(nil), th.windows...)
	th.mu.Unlock()
	if !reflect.DeepEqual(got, []int{5, 0}) {
		t.Fatalf("snapshot requests for windows %v, want [5 0] (the second window-5 joiner served from the feed's cache)", got)
	}
	// Lose a frame: advance the thread without publishing it.
	th.mu.Lock()
	th.seq += 5
	th.text.WriteString("lost;")
	th.mu.Unlock()
	th.publish(t, "b;")
	for _, c := range []*sseClient{v, v2, whole} {
		if m, err := c.next(); err != nil || !strings.Contains(m.data, `"type":"view","seq":9`) || !strings.Contains(m.data, `a;lost;b;`) {
			t.Fatalf("view after the gap: %+v %v", m, err)
		}
	}
	th.mu.Lock()
	got = append([]int(nil), th.windows...)
	th.mu.Unlock()
	// One request per window after the gap (single flight per window); the
	// order of the two is the race of the writers.
	if len(got) != 4 || !reflect.DeepEqual(sortedInts(got[2:]), []int{0, 5}) {
		t.Fatalf("snapshot requests for windows %v, want [5 0] then 0 and 5 after the gap", got)
	}
	if n := counterValue(srv.m.Resyncs.WithLabelValues(ReasonGap)); n != 3 {
		t.Fatalf("gap resyncs %v, want 3", n)
	}
}

func sortedInts(s []int) []int {
	out := append([]int(nil), s...)
	slices.Sort(out)
	return out
}
