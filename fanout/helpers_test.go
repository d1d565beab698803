package fanout

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
	"github.com/threadcast/threadcast/wire"
)

var testKey = []byte("fanout-test-key-0123456789")

// startNATS runs an embedded nats-server with JetStream (natstest.Start).
func startNATS(t testing.TB) *natstest.Server {
	t.Helper()
	return natstest.Start(t)
}

func connect(t testing.TB, ns *natstest.Server) *nats.Conn {
	t.Helper()
	return natstest.Connect(t, ns.ClientURL())
}

func token(t testing.TB, tenant string, threads ...string) string {
	t.Helper()
	tok, err := auth.Mint(testKey, auth.Claims{Tenant: tenant, Threads: threads, Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// testThread plays the pipeline for one thread on a real NATS server: it
// publishes frames in the documented format (wire/frame.go) and
// answers snapshot requests on the thread's partition subject, both under
// one lock so that a snapshot's seq is always the last published frame's,
// as the pipeline guarantees. Its view is the text of one assistant
// message, built from deltas that are each unique, so any gap or duplicate
// a subscriber suffers shows in its final text.
type testThread struct {
	nc         *nats.Conn
	tenant, id string
	token      string
	mu         sync.Mutex
	seq        uint64
	text       strings.Builder
	snapshots  int
	windows    []int  // the window of every snapshot request answered (0: whole)
	runID      string // the open run the snapshots restate ("r1" if empty)
	pad        string // added to every event (not to the text): big frames, small snapshots
	unknown    bool   // snapshots say the thread was never written: no events, an empty view
	finished   bool   // snapshots restate the run as finished: no run is open
	sub        *nats.Subscription
	// partSize, when set, sends frames and snapshot replies in parts of
	// that size (wire.Publish), as the pipeline does above its max
	// payload; dropPart, when set, loses the second part of the next
	// message sent in parts.
	partSize int
	dropPart bool
}

// send publishes m (a frame or a reply), in parts when partSize is set.
// Called with th.mu held.
func (th *testThread) send(m *nats.Msg) error {
	if th.partSize == 0 {
		return th.nc.PublishMsg(m)
	}
	return wire.Publish(&lossyPub{th: th}, m, th.partSize)
}

// lossyPub drops the second part of a message when its thread's dropPart
// is set (once).
type lossyPub struct {
	th *testThread
	n  int
}

func (p *lossyPub) PublishMsg(m *nats.Msg) error {
	p.n++
	if p.n == 2 && p.th.dropPart {
		p.th.dropPart = false
		return nil
	}
	return p.th.nc.PublishMsg(m)
}

func newTestThread(t testing.TB, nc *nats.Conn, tenant, id string) *testThread {
	t.Helper()
	th := &testThread{nc: nc, tenant: tenant, id: id, token: wire.EncodeThread(id)}
	subj := wire.SnapSubject(wire.Partition(tenant, th.token, wire.DefaultParts), tenant, th.token)
	sub, err := nc.Subscribe(subj, th.answer)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	th.sub = sub
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return th
}

func (th *testThread) answer(m *nats.Msg) {
	th.mu.Lock()
	defer th.mu.Unlock()
	th.snapshots++
	req, _ := wire.ParseSnapRequest(m.Data)
	th.windows = append(th.windows, req.Window)
	window := ""
	if req.Window > 0 { // the view holds one message: any window holds it all
		window = fmt.Sprintf(`"window":%d,`, req.Window)
	}
	text := th.text.String()
	view, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"id": "m1", "role": "assistant", "content": text}}})
	run := th.runID
	if run == "" {
		run = "r1"
	}
	evs := []string{
		fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":%q}`, th.id, run),
		`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m1","role":"assistant","content":` + string(mustJSON(text)) + `}]}`,
	}
	if th.finished {
		evs = append(evs, fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":%q}`, th.id, run))
	}
	if th.unknown {
		evs, view = nil, []byte(`{"messages":[]}`)
	}
	body := fmt.Sprintf(`{"tenant":%q,"thread":%q,"seq":%d,"status":"running","found":%v,%s"view":%s,"events":[%s]}`,
		th.tenant, th.id, th.seq, th.seq > 0, window, view, strings.Join(evs, ","))
	_ = th.send(&nats.Msg{Subject: m.Reply, Data: []byte(body), Header: nats.Header{wire.HeaderSeq: {strconv.FormatUint(th.seq, 10)}}})
}

func mustMarshal(v any) []byte { b, _ := json.Marshal(v); return b }

// publish sends one frame adding chunks (one TEXT_MESSAGE_CONTENT each).
// Stream seqs advance by len(chunks)+1, so they are not dense, as in a
// stream shared with other threads.
func (th *testThread) publish(t testing.TB, chunks ...string) uint64 {
	th.mu.Lock()
	defer th.mu.Unlock()
	prev := th.seq
	th.seq += uint64(len(chunks)) + 1
	evs := make([]string, len(chunks))
	for i, c := range chunks {
		evs[i] = fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":%s,"timestamp":%d%s}`, mustJSON(c), time.Now().UnixMilli(), th.pad)
		th.text.WriteString(c)
	}
	body := fmt.Sprintf(`{"tenant":%q,"thread":%q,"seq":%d,"prev":%d,"status":"running","events":[%s],"changes":{"append":%s}}`,
		th.tenant, th.id, th.seq, prev, strings.Join(evs, ","), mustJSON(strings.Join(chunks, "")))
	m := &nats.Msg{Subject: wire.ViewSubject(th.tenant, th.token), Data: []byte(body), Header: nats.Header{
		wire.HeaderSeq: {strconv.FormatUint(th.seq, 10)}, wire.HeaderPrev: {strconv.FormatUint(prev, 10)},
		wire.HeaderStatus: {"running"}}}
	if err := th.send(m); err != nil {
		t.Error(err)
	}
	return th.seq
}

func (th *testThread) Text() string {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.text.String()
}

// newServer returns a fanout Server behind an httptest.Server.
func newServer(t testing.TB, nc *nats.Conn, mod func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.AuthKey = testKey
	cfg.Hub.JoinWait = 100 * time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(nc, cfg, slog.New(slog.NewTextHandler(testLogWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Drain(); hs.Close() })
	return s, hs
}

// sseClient reads an SSE response the way a browser EventSource would.
type sseClient struct {
	resp   *http.Response
	br     *bufio.Reader
	cancel context.CancelFunc
	lastID string
}

type sseMsg struct {
	id, data string
	hasID    bool
	comment  string
}

func openSSE(t testing.TB, url, tok string, hdr http.Header) *sseClient {
	t.Helper()
	c, status := tryOpenSSE(t, url, tok, hdr)
	if status != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, status)
	}
	return c
}

func tryOpenSSE(t testing.TB, url, tok string, hdr http.Header) (*sseClient, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	s, status := testsupport.OpenSSE(t, req)
	if s == nil {
		return nil, status
	}
	return &sseClient{resp: s.Resp, br: s.BR, cancel: s.Cancel}, status
}

func (c *sseClient) close() { c.cancel(); c.resp.Body.Close() }

// next returns the next SSE message (data or, for comment-only or id-only
// blocks, the comment / id).
func (c *sseClient) next() (sseMsg, error) {
	ev, err := testsupport.ReadSSE(c.br)
	if err != nil {
		return sseMsg{}, err
	}
	if ev.HasID {
		c.lastID = ev.ID
	}
	return sseMsg{id: ev.ID, data: ev.Data, hasID: ev.HasID, comment: ev.Comment}, nil
}

// aguiModel applies the AG-UI events a subscriber receives to the one
// message the test threads have.
type aguiModel struct {
	text        string
	snapshots   int
	events      int
	runsStarted int
}

func (a *aguiModel) apply(t testing.TB, data string) {
	t.Helper()
	var ev struct {
		Type     string `json:"type"`
		Delta    string `json:"delta"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Fatalf("bad event %q: %v", data, err)
	}
	a.events++
	switch ev.Type {
	case "RUN_STARTED":
		a.runsStarted++
	case "MESSAGES_SNAPSHOT":
		a.snapshots++
		a.text = ""
		if len(ev.Messages) > 0 {
			a.text = ev.Messages[0].Content
		}
	case "TEXT_MESSAGE_CONTENT":
		a.text += ev.Delta
	}
}

// follow reads c until the model's text is want, failing after timeout.
func (a *aguiModel) follow(t testing.TB, c *sseClient, want func() string, timeout time.Duration) {
	t.Helper()
	timer := time.AfterFunc(timeout, c.cancel)
	defer timer.Stop()
	for a.text != want() {
		m, err := c.next()
		if err != nil {
			t.Fatalf("stream ended (%v) with text %q, want %q", err, shorten(a.text), shorten(want()))
		}
		if m.data != "" {
			a.apply(t, m.data)
			if !strings.HasPrefix(want(), a.text) {
				t.Fatalf("text diverged: %q is not a prefix of %q", shorten(a.text), shorten(want()))
			}
		}
	}
}

func shorten(s string) string {
	if len(s) > 80 {
		return "…" + s[len(s)-80:]
	}
	return s
}

// counterValue reads a counter or gauge.
func counterValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func newBufReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

func connectURL(t testing.TB, url string) *nats.Conn {
	t.Helper()
	return natstest.Connect(t, url)
}

// followReconnecting follows c like follow, but when the stream ends it
// reconnects to url with the last id it saw, as EventSource does.
func (a *aguiModel) followReconnecting(t testing.TB, c *sseClient, url, tok string, want func() string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for a.text != want() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out with %q, want %q", shorten(a.text), shorten(want()))
		}
		m, err := c.next()
		if err != nil {
			var hdr http.Header
			if c.lastID != "" {
				hdr = http.Header{"Last-Event-Id": {c.lastID}}
			}
			c.close()
			c = openSSE(t, url, tok, hdr)
			continue
		}
		if m.data != "" {
			a.apply(t, m.data)
			if !strings.HasPrefix(want(), a.text) {
				t.Fatalf("text diverged: %q is not a prefix of %q", shorten(a.text), shorten(want()))
			}
		}
	}
}

// publishEvents sends one frame of raw events (the text does not change).
func (th *testThread) publishEvents(t testing.TB, evs ...string) uint64 {
	th.mu.Lock()
	defer th.mu.Unlock()
	prev := th.seq
	th.seq += uint64(len(evs))
	body := fmt.Sprintf(`{"tenant":%q,"thread":%q,"seq":%d,"prev":%d,"events":[%s]}`, th.tenant, th.id, th.seq, prev, strings.Join(evs, ","))
	m := &nats.Msg{Subject: wire.ViewSubject(th.tenant, th.token), Data: []byte(body), Header: nats.Header{
		wire.HeaderSeq: {strconv.FormatUint(th.seq, 10)}, wire.HeaderPrev: {strconv.FormatUint(prev, 10)}}}
	if err := th.send(m); err != nil {
		t.Error(err)
	}
	return th.seq
}

// histogram returns h's sample count and sum.
func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}
