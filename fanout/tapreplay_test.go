package fanout

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// tapMsg is one message of a tap replay as a client reads it.
type tapMsg struct {
	id   uint64
	data string
}

// tapStream opens GET /v1/tap with query (and Last-Event-ID when not "")
// and returns its messages as they come, until the returned cancel.
func tapStream(t *testing.T, url, tok, lastID string) (<-chan tapMsg, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		cancel()
		t.Fatalf("%s: %v %v", url, err, resp)
	}
	ch := make(chan tapMsg, 1<<16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var cur tapMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				cur.id, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "data: "):
				cur.data = strings.TrimPrefix(line, "data: ")
			case line == "" && cur.data != "":
				ch <- cur
				cur = tapMsg{}
			}
		}
	}()
	return ch, func() { cancel(); resp.Body.Close(); wg.Wait() }
}

// take reads n messages from ch, failing after d.
func take(t *testing.T, ch <-chan tapMsg, n int, d time.Duration) []tapMsg {
	t.Helper()
	var out []tapMsg
	timeout := time.After(d)
	for len(out) < n {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended after %d of %d messages", len(out), n)
			}
			out = append(out, m)
		case <-timeout:
			t.Fatalf("%d of %d messages within %v: %v", len(out), n, d, out)
		}
	}
	return out
}

// quiet checks that ch delivers nothing more for d.
func quiet(t *testing.T, ch <-chan tapMsg, d time.Duration) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("unexpected message %+v", m)
	case <-time.After(d):
	}
}

// tapEnv is a real server with the pipeline's tap stream and a fanout
// reading it.
type tapEnv struct {
	js  jetstream.JetStream
	url string
}

func newTapEnv(t *testing.T) tapEnv {
	ns := startNATS(t)
	nc := connect(t, ns)
	js, _ := jetstream.New(nc)
	pc := pipeline.DefaultConfig()
	pc.TapKeep = pipeline.TapKeepAll
	if _, err := js.CreateStream(t.Context(), pipeline.TapStreamConfig(&pc)); err != nil {
		t.Fatal(err)
	}
	_, hs := newServer(t, nc, nil)
	return tapEnv{js, hs.URL + "/v1/tap"}
}

// pub stores one tap message and returns its tap stream seq.
func (e tapEnv) pub(t *testing.T, tenant, typ, thread, data string) uint64 {
	t.Helper()
	ack, err := e.js.PublishMsg(t.Context(), &nats.Msg{Subject: wire.TapSubject(tenant, typ, wire.EncodeThread(thread)), Data: []byte(data)})
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func TestTapReplaySinceSeq(t *testing.T) {
	e := newTapEnv(t)
	var seqs []uint64
	for i := range 5 {
		seqs = append(seqs, e.pub(t, "acme", "RUN_STARTED", "t1", fmt.Sprintf(`{"n":%d}`, i)))
		e.pub(t, "other", "RUN_STARTED", "t1", `{"tenant":"other"}`)
	}
	ch, stop := tapStream(t, e.url+"?since="+strconv.FormatUint(seqs[2], 10), token(t, "acme"), "")
	defer stop()
	got := take(t, ch, 3, 5*time.Second)
	for i, m := range got {
		if m.id != seqs[2+i] || m.data != fmt.Sprintf(`{"n":%d}`, 2+i) {
			t.Fatalf("replayed %d: %+v, want id %d n %d", i, m, seqs[2+i], 2+i)
		}
	}
	// Then live, on the same stream.
	live := e.pub(t, "acme", wire.RunSummaryType, "t1", `{"n":5}`)
	e.pub(t, "other", wire.RunSummaryType, "t1", `{"tenant":"other"}`)
	if m := take(t, ch, 1, 5*time.Second)[0]; m.id != live || m.data != `{"n":5}` {
		t.Fatalf("live: %+v, want id %d", m, live)
	}
	quiet(t, ch, 300*time.Millisecond)

	// Last-Event-ID resumes after the id it names (and wins over ?since=).
	ch2, stop2 := tapStream(t, e.url+"?since=1", token(t, "acme"), strconv.FormatUint(seqs[3], 10))
	defer stop2()
	got = take(t, ch2, 2, 5*time.Second)
	if got[0].id != seqs[4] || got[1].id != live {
		t.Fatalf("resumed after %d: %+v", seqs[3], got)
	}
	quiet(t, ch2, 300*time.Millisecond)
}

func TestTapReplaySinceTime(t *testing.T) {
	e := newTapEnv(t)
	e.pub(t, "acme", "RUN_STARTED", "t1", `{"n":0}`)
	time.Sleep(50 * time.Millisecond)
	at := time.Now()
	time.Sleep(50 * time.Millisecond)
	s1 := e.pub(t, "acme", "RUN_STARTED", "t1", `{"n":1}`)
	s2 := e.pub(t, "acme", "TEXT_MESSAGE_CONTENT", "t2", `{"n":2}`)
	ch, stop := tapStream(t, e.url+"?since="+at.UTC().Format(time.RFC3339Nano), token(t, "acme"), "")
	defer stop()
	got := take(t, ch, 2, 5*time.Second)
	if got[0].id != s1 || got[1].id != s2 {
		t.Fatalf("since %v: %+v, want ids %d %d", at, got, s1, s2)
	}
	quiet(t, ch, 300*time.Millisecond)

	// ?types= and a token limited to threads narrow the replay.
	ch2, stop2 := tapStream(t, e.url+"?types=TEXT_MESSAGE_CONTENT&since=1", token(t, "acme"), "")
	defer stop2()
	if m := take(t, ch2, 1, 5*time.Second)[0]; m.id != s2 {
		t.Fatalf("types: %+v, want id %d", m, s2)
	}
	quiet(t, ch2, 300*time.Millisecond)
	ch3, stop3 := tapStream(t, e.url+"?since=1", token(t, "acme", "t1"), "")
	defer stop3()
	if got := take(t, ch3, 2, 5*time.Second); got[0].data != `{"n":0}` || got[1].id != s1 {
		t.Fatalf("thread-limited token: %+v", got)
	}
	quiet(t, ch3, 300*time.Millisecond)
}

// TestTapReplaySeam replays while the tap is being published: every
// message of the tenant arrives exactly once and in order, whatever was
// stored before the replay's consumer started and whatever after.
func TestTapReplaySeam(t *testing.T) {
	e := newTapEnv(t)
	const n = 2000
	first := e.pub(t, "acme", "RUN_STARTED", "t0", `{"n":0}`)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i < n; i++ {
			if _, err := e.js.PublishAsync(wire.TapSubject("acme", "TEXT_MESSAGE_CONTENT", "t0"), []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
				t.Error(err)
				return
			}
			if i%100 == 0 {
				<-e.js.PublishAsyncComplete()
			}
		}
		<-e.js.PublishAsyncComplete()
	}()
	time.Sleep(20 * time.Millisecond) // the replay opens while publishing goes on
	ch, stop := tapStream(t, e.url+"?since="+strconv.FormatUint(first, 10), token(t, "acme"), "")
	defer stop()
	got := take(t, ch, n, 30*time.Second)
	wg.Wait()
	for i, m := range got {
		if m.data != fmt.Sprintf(`{"n":%d}`, i) || m.id != first+uint64(i) {
			t.Fatalf("message %d: %+v (a gap or a duplicate at the seam)", i, m)
		}
	}
	quiet(t, ch, 300*time.Millisecond)
}

// TestTapReplayPartedMessage: a tap message the pipeline sent in parts
// (wire.Publish, stored part by part in the tap stream) is replayed whole,
// with an id that a resume (Last-Event-ID) can start after. Another
// thread's message stored between its parts is delivered before it with
// the seq before the parted message's first part as its id: resuming
// after that id replays the parted message (and the other one again)
// rather than losing it. The parted message's id is its last part's seq:
// resuming after it starts at the next message, not inside it.
func TestTapReplayPartedMessage(t *testing.T) {
	e := newTapEnv(t)
	first := e.pub(t, "acme", "RUN_STARTED", "t0", `{"n":0}`)
	big := `{"n":"` + strings.Repeat("x", 3000) + `"}`
	store := &tapStore{t: t, js: e.js, between: func() uint64 {
		return e.pub(t, "acme", "RUN_STARTED", "t2", `{"n":2}`)
	}}
	m := &nats.Msg{Subject: wire.TapSubject("acme", "RUN_STARTED", wire.EncodeThread("t1")), Data: []byte(big),
		Header: nats.Header{wire.HeaderSeq: {"7"}}}
	if err := wire.Publish(store, m, 1024); err != nil { // 3 parts
		t.Fatal(err)
	}
	if len(store.seqs) != 3 {
		t.Fatalf("stored %d parts, want 3", len(store.seqs))
	}
	next := e.pub(t, "acme", "RUN_STARTED", "t3", `{"n":3}`)

	tests := []struct {
		name   string
		lastID uint64 // 0: from first
		want   []tapMsg
	}{
		{"from the start", 0, []tapMsg{{first, `{"n":0}`}, {store.seqs[0] - 1, `{"n":2}`}, {store.seqs[2], big}, {next, `{"n":3}`}}},
		{"after the message between the parts", store.seqs[0] - 1, []tapMsg{{store.seqs[0] - 1, `{"n":2}`}, {store.seqs[2], big}, {next, `{"n":3}`}}},
		{"after the parted message", store.seqs[2], []tapMsg{{next, `{"n":3}`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lastID := ""
			if tt.lastID != 0 {
				lastID = strconv.FormatUint(tt.lastID, 10)
			}
			ch, stop := tapStream(t, e.url+"?since="+strconv.FormatUint(first, 10), token(t, "acme"), lastID)
			defer stop()
			got := take(t, ch, len(tt.want), 5*time.Second)
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("message %d: id %d, %d bytes; want id %d, %d bytes", i, got[i].id, len(got[i].data), tt.want[i].id, len(tt.want[i].data))
				}
			}
			quiet(t, ch, 300*time.Millisecond)
		})
	}
}

// TestTapReplayResumeAtZero: a message delivered while another is in
// assembly gets an id below that one's first part; when that part is the
// tap stream's first message, the id is 0, and a client resuming after it
// (Last-Event-ID: 0) gets the stream again from its first message.
func TestTapReplayResumeAtZero(t *testing.T) {
	e := newTapEnv(t)
	tok := token(t, "acme")
	big := `{"n":"` + strings.Repeat("x", 3000) + `"}`
	var between uint64
	store := &tapStore{t: t, js: e.js, between: func() uint64 {
		between = e.pub(t, "acme", "RUN_STARTED", "t2", `{"n":2}`)
		return between
	}}
	m := &nats.Msg{Subject: wire.TapSubject("acme", "RUN_STARTED", wire.EncodeThread("t1")), Data: []byte(big),
		Header: nats.Header{wire.HeaderSeq: {"7"}}}
	if err := wire.Publish(store, m, 1024); err != nil { // 3 parts
		t.Fatal(err)
	}
	if len(store.seqs) != 3 || store.seqs[0] != 1 || between != 2 {
		t.Fatalf("premise: parts at %v, the message between them at %d", store.seqs, between)
	}
	want := []tapMsg{{0, `{"n":2}`}, {store.seqs[2], big}}
	ch, stop := tapStream(t, e.url+"?since=1", tok, "")
	got := take(t, ch, 2, 5*time.Second)
	stop()
	if got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("premise: ids %d, %d; want %d, %d", got[0].id, got[1].id, want[0].id, want[1].id)
	}
	// The client resumes after the first message it read.
	ch, stop = tapStream(t, e.url+"?since=1", tok, strconv.FormatUint(got[0].id, 10))
	defer stop()
	got = take(t, ch, 2, 5*time.Second)
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("resumed, message %d: id %d, %d bytes; want id %d, %d bytes", i, got[i].id, len(got[i].data), want[i].id, len(want[i].data))
		}
	}
}

// tapStore is a wire.Publisher that stores each message in the tap stream
// and waits for its seq (seqs), with another message (between) stored
// after the first: the interleaving of two shards publishing at once.
type tapStore struct {
	t       *testing.T
	js      jetstream.JetStream
	between func() uint64
	seqs    []uint64
}

func (s *tapStore) PublishMsg(m *nats.Msg) error {
	ack, err := s.js.PublishMsg(s.t.Context(), m)
	if err != nil {
		return err
	}
	s.seqs = append(s.seqs, ack.Sequence)
	if len(s.seqs) == 1 {
		s.between()
	}
	return nil
}

func TestTapReplayErrors(t *testing.T) {
	e := newTapEnv(t)
	tok := token(t, "acme")
	for _, tt := range []struct{ query, lastID, detail string }{
		{"?since=yesterday", "", `since: "yesterday" is neither an RFC 3339 time`},
		{"?since=0", "", "since: a tap stream seq starts at 1"},
		{"?since=-3", "", `since: "-3" is neither`},
		{"?since=2026-13-01T00:00:00Z", "", "is neither an RFC 3339 time"},
		{"", "abc", `Last-Event-ID: "abc" is not a tap stream seq`},
		{"", "18446744073709551615", `Last-Event-ID: "18446744073709551615" is not a tap stream seq`},
	} {
		var hdr http.Header
		if tt.lastID != "" {
			hdr = http.Header{"Last-Event-ID": {tt.lastID}}
		}
		code, body := do(t, "GET", e.url+tt.query, tok, "", hdr)
		var er struct{ Error, Detail string }
		_ = json.Unmarshal([]byte(body), &er)
		if code != http.StatusBadRequest || er.Error != "bad_since" || !strings.Contains(er.Detail, tt.detail) {
			t.Errorf("%s %s: %d %s; want 400 bad_since %q", tt.query, tt.lastID, code, body, tt.detail)
		}
	}

	// A fanout that keeps no tap stream, or whose stream is missing.
	ns := startNATS(t)
	nc := connect(t, ns)
	for _, mod := range []func(*Config){func(c *Config) { c.TapStream = "" }, nil} {
		_, hs := newServer(t, nc, mod)
		code, body := do(t, "GET", hs.URL+"/v1/tap?since=1", tok, "", nil)
		if code != http.StatusNotFound || !strings.Contains(body, `"error":"tap_not_durable"`) {
			t.Errorf("no tap stream: %d %s; want 404 tap_not_durable", code, body)
		}
	}
}
