package fanout

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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

// storedEvent is one event of the thread under test with its stream seq.
type storedEvent struct {
	seq uint64
	raw string
}

// viewAtBody is GET /v1/threads/{thread}?at='s body.
type viewAtBody struct {
	Thread string          `json:"thread"`
	Seq    uint64          `json:"seq"`
	At     uint64          `json:"at"`
	Status string          `json:"status"`
	View   json.RawMessage `json:"view"`
}

// reduceUpTo is the independent reduction: the reducer applied directly to
// the thread's events with a seq up to at.
func reduceUpTo(t *testing.T, id string, evs []storedEvent, at uint64) []byte {
	t.Helper()
	th := reducer.NewThread(id)
	var dec codec.Decoder
	var ev codec.Event
	for _, e := range evs {
		if e.seq > at {
			break
		}
		err := dec.Decode([]byte(e.raw), &ev)
		th.ApplyDecoded(e.seq, &ev, err, dec.Warnings())
	}
	return th.AppendView(nil)
}

// TestThreadViewAt publishes a thread (one message of it a JSONL batch)
// interleaved with another thread and another tenant's thread of the same
// id, reduced live by the real pipeline; the view at every seq of the log
// must equal the independent reduction of the thread's events up to it,
// and the view at its last seq the live view.
func TestThreadViewAt(t *testing.T) {
	ns := startNATS(t)
	startIngest(t, ns, 4)
	nc := connect(t, ns)
	js, _ := jetstream.New(nc)
	_, hs := newServer(t, nc, func(c *Config) { c.Hub.Partitions = 4 })
	const id = "t.1 é" // not a plain token: the subject is its encoding
	thread := []string{
		`{"type":"RUN_STARTED","threadId":"` + id + `","runId":"r1"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hello "}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"world"}` + "\n" + `{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"a":1,"b":[1]}}`,
		`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/a","value":2}]}`,
		`{"type":"RUN_FINISHED","threadId":"` + id + `","runId":"r1"}`,
		`{"type":"RUN_STARTED","threadId":"` + id + `","runId":"r2"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","role":"assistant","delta":"again"}`,
		`{"type":"RUN_ERROR","message":"boom","code":"E1"}`,
	}
	pub := func(tenant, thread, data string) uint64 {
		subj, err := wire.EventSubject(tenant, thread)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := js.PublishMsg(t.Context(), &nats.Msg{Subject: subj, Data: []byte(data)})
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	var evs []storedEvent
	for i, m := range thread {
		seq := pub("acme", id, m)
		for _, line := range strings.Split(m, "\n") {
			evs = append(evs, storedEvent{seq, line})
		}
		pub("acme", "neighbour", `{"type":"RUN_STARTED","threadId":"neighbour","runId":"n`+strconv.Itoa(i)+`"}`)
		pub("other", id, `{"type":"RUN_STARTED","threadId":"`+id+`","runId":"o`+strconv.Itoa(i)+`"}`)
	}
	first, last := evs[0].seq, evs[len(evs)-1].seq
	tok := token(t, "acme")
	base := hs.URL + "/v1/threads/" + url.PathEscape(id)

	// The live view reaches the last seq.
	var live struct {
		Seq    uint64          `json:"seq"`
		Status string          `json:"status"`
		View   json.RawMessage `json:"view"`
	}
	testsupport.WaitFor(t, 20*time.Second, "the live view at the last seq", func() bool {
		code, body := do(t, "GET", base, tok, "", nil)
		return code == 200 && json.Unmarshal([]byte(body), &live) == nil && live.Seq == last
	})

	for at := first; at <= last; at++ { // the seqs of the other threads' events too
		code, body := do(t, "GET", base+"?at="+strconv.FormatUint(at, 10), tok, "", nil)
		var got viewAtBody
		if code != 200 || json.Unmarshal([]byte(body), &got) != nil {
			t.Fatalf("at %d: %d %s", at, code, body)
		}
		want := reduceUpTo(t, id, evs, at)
		if eq, err := jsondoc.Equal(got.View, want); err != nil || !eq {
			t.Fatalf("at %d: view\n %s\nwant\n %s", at, got.View, want)
		}
		var wantSeq uint64
		for _, e := range evs {
			if e.seq <= at {
				wantSeq = e.seq
			}
		}
		if got.Seq != wantSeq || got.At != at || got.Thread != id {
			t.Fatalf("at %d: seq %d at %d thread %q; want seq %d", at, got.Seq, got.At, got.Thread, wantSeq)
		}
	}
	code, body := do(t, "GET", base+"?at="+strconv.FormatUint(last, 10), tok, "", nil)
	var atLast viewAtBody
	if code != 200 || json.Unmarshal([]byte(body), &atLast) != nil {
		t.Fatalf("at last: %d %s", code, body)
	}
	if eq, err := jsondoc.Equal(atLast.View, live.View); err != nil || !eq {
		t.Fatalf("at the last seq the view differs from the live view:\n %s\nlive\n %s", atLast.View, live.View)
	}
	if atLast.Status != live.Status || atLast.Seq != live.Seq {
		t.Fatalf("at the last seq: status %q seq %d; live %q %d", atLast.Status, atLast.Seq, live.Status, live.Seq)
	}

	// The other tenant's thread of the same id is its own.
	code, body = do(t, "GET", base+"?at="+strconv.FormatUint(last, 10), token(t, "other"), "", nil)
	if code != 200 || strings.Contains(body, "hello") {
		t.Fatalf("tenant other at %d: %d %s", last, code, body)
	}

	// Errors.
	for _, tt := range []struct {
		query, thread  string
		code           int
		reason, detail string
	}{
		{"?at=abc", "", 400, "bad_at", "at must be an event log seq"},
		{"?at=0", "", 400, "bad_at", "at must be an event log seq"},
		{"?at=-1", "", 400, "bad_at", "at must be an event log seq"},
		{"?at=", "", 400, "bad_at", "at must be an event log seq"},
		{"?at=1&window=2", "", 400, "bad_at", "at and window cannot be combined"},
		{"?at=" + strconv.FormatUint(last+100, 10), "", 400, "at_beyond_end",
			fmt.Sprintf("at %d is beyond the thread's last stored event, seq %d", last+100, last)},
		{"?at=1", hs.URL + "/v1/threads/nobody", 404, "not_found", ""},
	} {
		u := base
		if tt.thread != "" {
			u = tt.thread
		}
		code, body := do(t, "GET", u+tt.query, tok, "", nil)
		var e struct{ Error, Detail string }
		_ = json.Unmarshal([]byte(body), &e)
		if code != tt.code || e.Error != tt.reason || !strings.Contains(e.Detail, tt.detail) {
			t.Errorf("%s: %d %s; want %d %s %q", tt.query, code, body, tt.code, tt.reason, tt.detail)
		}
	}
	if code, _ := do(t, "GET", base+"?at=1", "", "", nil); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d", code)
	}
}
