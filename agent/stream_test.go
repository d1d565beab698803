package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/pipeline"
)

// corpusCase is the part of a conformance case these tests use.
type corpusCase struct {
	Name             string            `json:"name"`
	Events           []json.RawMessage `json:"events"`
	ExpectedError    any               `json:"expectedError"`
	ExpectedWarnings int               `json:"expectedWarnings"`
}

// cleanCorpus loads the conformance cases whose every event a conforming
// consumer accepts without a warning or an error: every one of their events
// must be accepted by the publisher too.
func cleanCorpus(t *testing.T) []corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testsupport.ConformanceDir(t), "cases", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance cases (%v)", err)
	}
	var out []corpusCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c corpusCase
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.ExpectedError == nil && c.ExpectedWarnings == 0 && len(c.Events) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// frame renders events in one of PublishStream's input formats.
func frame(format string, events []json.RawMessage) []byte {
	var b bytes.Buffer
	switch format {
	case "jsonl":
		for _, ev := range events {
			var c bytes.Buffer
			_ = json.Compact(&c, ev)
			b.Write(c.Bytes())
			b.WriteByte('\n')
		}
	case "array":
		// Indented, as a recorded file would be: the events keep newlines.
		out, _ := json.MarshalIndent(events, "", "  ")
		b.Write(out)
	case "sse":
		b.WriteString(": keep-alive\n\n")
		for i, ev := range events {
			var c bytes.Buffer
			_ = json.Compact(&c, ev)
			b.WriteString("event: message\nid: " + string(rune('a'+i%26)) + "\ndata: ")
			b.Write(c.Bytes())
			b.WriteString("\n\n")
		}
	}
	return b.Bytes()
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestPublishStreamCorpus publishes each clean conformance stream in each
// input format and checks that the thread's stored events equal the input,
// in order.
func TestPublishStreamCorpus(t *testing.T) {
	cases := cleanCorpus(t)
	env := startJS(t, false)
	p := newPublisher(t, env, withLinger(2*time.Millisecond))
	ctx := testCtx(t)
	formats := []string{"jsonl", "array", "sse"}
	want := map[string][]json.RawMessage{} // thread → events
	for _, c := range cases {
		for _, format := range formats {
			thread := c.Name + " (" + format + ")" // '/', spaces, parentheses: encoded
			events := withThread(c.Events, thread)
			res, err := agent.PublishStream(ctx, p, "conf", thread, bytes.NewReader(frame(format, events)), agent.StreamOptions{})
			if err != nil {
				t.Fatalf("%s: %v", thread, err)
			}
			if res.Format != format || res.Events != len(c.Events) || res.Accepted != len(c.Events) ||
				res.RejectedCount != 0 || res.FailedCount != 0 {
				t.Fatalf("%s: result %+v, want all %d events accepted", thread, res, len(c.Events))
			}
			want[thread] = events
		}
	}
	got := map[string][][]byte{}
	for _, m := range readStream(t, env.js) {
		got[m.thread] = append(got[m.thread], m.events...)
	}
	if len(got) != len(want) {
		t.Fatalf("%d threads stored, want %d", len(got), len(want))
	}
	for thread, evs := range want {
		if len(got[thread]) != len(evs) {
			t.Errorf("%s: %d events stored, want %d", thread, len(got[thread]), len(evs))
			continue
		}
		for i, ev := range evs {
			if !jsonEqual(t, got[thread][i], ev) {
				t.Errorf("%s: event %d stored as %s, want %s", thread, i, got[thread][i], ev)
			}
		}
	}
}

// TestPublishStreamErrors: bad events are reported by index and skipped, bad
// framing stops the stream but keeps what came before, bad names stop it
// before reading.
func TestPublishStreamErrors(t *testing.T) {
	good := func(i int) string { return string(contentEvent("m", i)) }
	tests := []struct {
		name         string
		tenant       string
		give         string
		opts         agent.StreamOptions
		wantErr      error // errors.Is; nil for success
		wantKind     codec.Kind
		wantAccepted int
		wantRejected []int
		wantCount    int // RejectedCount
	}{
		{
			name:         "invalid events in the middle",
			give:         good(0) + "\n" + `{"type":"NOPE"}` + "\n" + good(1) + "\n" + `{"type":"TEXT_MESSAGE_CONTENT","delta":"x"}` + "\n" + good(2) + "\n",
			wantAccepted: 3, wantRejected: []int{1, 3}, wantCount: 2,
		},
		{
			name:         "errors list capped, count exact",
			give:         strings.Repeat(`{"type":"NOPE"}`+"\n", 5) + good(0),
			opts:         agent.StreamOptions{MaxErrors: 2},
			wantAccepted: 1, wantRejected: []int{0, 1}, wantCount: 5,
		},
		{
			name:    "truncated last event",
			give:    good(0) + "\n" + good(1) + "\n" + `{"type":"TEXT_MESS`,
			wantErr: codec.ErrStream, wantKind: codec.KindTruncated, // a truncation is bad framing too
			wantAccepted: 2,
		},
		{
			name:    "event over the size limit",
			give:    good(0) + "\n" + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat("x", 200) + `"}`,
			opts:    agent.StreamOptions{MaxEventBytes: 100},
			wantErr: codec.ErrTooLarge, wantKind: codec.KindTooLarge,
			wantAccepted: 1,
		},
		{
			name:    "bad tenant",
			tenant:  "Not.A.Tenant",
			give:    good(0),
			wantErr: agent.ErrBadTenant,
		},
	}
	env := startJS(t, false)
	p := newPublisher(t, env, withLinger(time.Millisecond))
	ctx := testCtx(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant := tt.tenant
			if tenant == "" {
				tenant = "acme"
			}
			res, err := agent.PublishStream(ctx, p, tenant, tt.name, strings.NewReader(tt.give), tt.opts)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			var cerr *codec.Error
			if tt.wantKind != 0 && (!errors.As(err, &cerr) || cerr.Kind != tt.wantKind) {
				t.Errorf("error %v, want a codec error of kind %v", err, tt.wantKind)
			}
			var idx []int
			for _, r := range res.Rejected {
				idx = append(idx, r.Index)
				if !errors.Is(r.Err, agent.ErrInvalid) {
					t.Errorf("rejection %d: %v", r.Index, r.Err)
				}
			}
			if res.Accepted != tt.wantAccepted || !reflect.DeepEqual(idx, tt.wantRejected) || res.RejectedCount != tt.wantCount {
				t.Errorf("accepted %d, rejected %v (%d); want %d, %v (%d)", res.Accepted, idx, res.RejectedCount,
					tt.wantAccepted, tt.wantRejected, tt.wantCount)
			}
		})
	}
}

// threadIDMember matches a "threadId" member (event or run input) in an
// event's JSON text.
var threadIDMember = regexp.MustCompile(`"threadId"(\s*):(\s*)"(?:[^"\\]|\\.)*"`)

// withThread returns events with every threadId naming thread: an event
// published to a thread must not name another (agent.ErrOtherThread), and
// the fixtures' events all say "thread-1".
func withThread(events []json.RawMessage, thread string) []json.RawMessage {
	id, _ := json.Marshal(thread)
	out := make([]json.RawMessage, len(events))
	for i, ev := range events {
		out[i] = threadIDMember.ReplaceAll(ev, append([]byte(`"threadId"$1:$2`), bytes.ReplaceAll(id, []byte("$"), []byte("$$"))...))
	}
	return out
}

// TestPublishStreamWindowPastFailedEvent: an event the stream refuses for
// good (here, over the stream's max message size) while the window is full
// is one failed event, not the end of the stream: the events after it are
// read and published.
func TestPublishStreamWindowPastFailedEvent(t *testing.T) {
	env := startJS(t, true)
	cfg := pipeline.DefaultConfig()
	cfg.MaxMsgSize = 1024
	ctx := testCtx(t)
	if _, err := env.js.CreateStream(ctx, pipeline.StreamConfig(&cfg)); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, env, withLinger(0))
	big := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat("x", 2000) + `"}`
	body := strings.Join([]string{string(contentEvent("m", 0)), big, string(contentEvent("m", 2)), string(contentEvent("m", 3))}, "\n")
	// A window of one byte: each event waits for the one before it.
	res, err := agent.PublishStream(ctx, p, "acme", "t", strings.NewReader(body), agent.StreamOptions{Window: 1})
	if err != nil {
		t.Fatalf("PublishStream: %v; want no error (one event failed)", err)
	}
	if res.Events != 4 || res.Accepted != 3 || res.FailedCount != 1 || len(res.Failed) != 1 || res.Failed[0].Index != 1 ||
		!errors.Is(res.Failed[0].Err, agent.ErrPublish) {
		t.Fatalf("result %+v; want 4 events, 3 accepted and event 1 failed with ErrPublish", res)
	}
}

// ackedThenCancel is a body that, once its events are read, waits until
// the Publisher has acked want events and then cancels the stream's ctx
// before it ends.
type ackedThenCancel struct {
	t      *testing.T
	body   *strings.Reader
	p      *agent.Publisher
	want   uint64
	cancel context.CancelFunc
}

func (r *ackedThenCancel) Read(b []byte) (int, error) {
	if r.body.Len() > 0 {
		return r.body.Read(b)
	}
	testsupport.WaitFor(r.t, 10*time.Second, "every event acked", func() bool { return r.p.Stats().Acked >= r.want })
	r.cancel()
	return 0, io.EOF
}

// TestPublishStreamCountsAckedAfterCtxEnds: when the ctx ends after every
// event is stored, the result still counts each of them as accepted (a
// caller told fewer would send the others again).
func TestPublishStreamCountsAckedAfterCtxEnds(t *testing.T) {
	env := startJS(t, false)
	p := newPublisher(t, env, withLinger(time.Millisecond))
	const n = 32
	var body strings.Builder
	for i := range n {
		body.Write(contentEvent("m", i))
		body.WriteByte('\n')
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	r := &ackedThenCancel{t: t, body: strings.NewReader(body.String()), p: p, want: n, cancel: cancel}
	res, err := agent.PublishStream(ctx, p, "acme", "t", r, agent.StreamOptions{})
	if err != nil || res.Events != n || res.Accepted != n {
		t.Fatalf("result %+v, %v; want %d events, all accepted, no error", res, err, n)
	}
}
