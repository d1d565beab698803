package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/internal/longthread"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// TestSnapQueueByBody: requests for one thread with different bodies are
// answered separately; with the same body, together.
func TestSnapQueueByBody(t *testing.T) {
	q := newSnapQueue(8)
	for _, body := range []string{"", `{"window":5}`, "", `{"window":5}`, `{"window":6}`} {
		if !q.add(&nats.Msg{Subject: "s", Data: []byte(body)}) {
			t.Fatalf("add %q refused", body)
		}
	}
	groups := q.take(nil, 10)
	if len(groups) != 3 {
		t.Fatalf("%d groups, want 3 (full, window 5, window 6): %+v", len(groups), groups)
	}
	for i, want := range []struct {
		body string
		n    int
	}{{"", 2}, {`{"window":5}`, 2}, {`{"window":6}`, 1}} {
		g := groups[i]
		if g.subject != "s" || string(g.body) != want.body || len(g.reqs) != want.n {
			t.Errorf("group %d: %s %q ×%d, want s %q ×%d", i, g.subject, g.body, len(g.reqs), want.body, want.n)
		}
	}
}

// offlineThread reduces a thread's events, with the stream seqs they were
// stored at, with the reducer alone (as offlineView does) and returns the
// Thread.
func offlineThread(id string, events []json.RawMessage, seqs []uint64) *reducer.Thread {
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

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	mustJSON(t, a, &x)
	mustJSON(t, b, &y)
	return reflect.DeepEqual(x, y)
}

// TestWindowedSnapshotAndPages publishes a long thread, then checks the
// windowed snapshot and every page back to the first message against the
// offline reduction of what was stored, for a hot thread and for one
// reloaded from its chunked checkpoint on every request.
func TestWindowedSnapshotAndPages(t *testing.T) {
	for _, cold := range []bool{false, true} {
		t.Run(map[bool]string{false: "hot", true: "cold"}[cold], func(t *testing.T) {
			s := runServer(t)
			nc := connect(t, s)
			js, _ := jetstream.New(nc)
			cfg := testConfig()
			cfg.Metrics = NewMetrics(nil)
			if cold {
				cfg.MaxMsgSize = 64 << 10 // the checkpoint is stored in chunks
				cfg.MemoryBudget = 1      // evict every clean thread after each batch
			}
			startIngest(t, nc, cfg)
			g := &longthread.Gen{Thread: "long", RunLen: 40}
			evs := g.Messages(3000) // the last run stays open
			streams := []stream{{tenant: "acme", thread: "long", events: evs}}
			seqs := publishStreams(t, js, streams, 200)
			waitFor(t, 60*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
			want := offlineThread("long", evs, seqs["acme/long"])
			if cold {
				// Evicted after its last batch: every request below loads it.
				waitFor(t, 20*time.Second, func() error {
					var m dto.Metric
					if err := cfg.Metrics.HotThreads.Write(&m); err != nil || m.GetGauge().GetValue() != 0 {
						return fmt.Errorf("%v hot threads (%v)", m.GetGauge().GetValue(), err)
					}
					return nil
				})
			}

			tok := wire.EncodeThread("long")
			subj := wire.SnapSubject(wire.Partition("acme", tok, cfg.Partitions), "acme", tok)
			ask := func(r wire.SnapRequest) *nats.Msg {
				t.Helper()
				msg, err := nc.Request(subj, r.Encode(), 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				return msg
			}

			for _, n := range []int{1, 50, 5000} {
				sn, err := wire.ParseSnapshot(ask(wire.SnapRequest{Window: n}))
				if err != nil {
					t.Fatal(err)
				}
				if sn.Seq != want.Seq() || sn.Window != n || !sn.Found || sn.Status != want.Status().String() {
					t.Fatalf("window %d: seq %d window %d found %v status %s; want seq %d, %s", n, sn.Seq, sn.Window, sn.Found, sn.Status, want.Seq(), want.Status())
				}
				if !sameJSON(t, sn.View, want.AppendWindowView(nil, n)) {
					t.Fatalf("window %d: view differs from the offline reduction's window", n)
				}
				wantEv := bytes.Split(bytes.TrimSuffix(want.AppendWindowSnapshotEvents(nil, n), []byte("\n")), []byte("\n"))
				if len(wantEv) != len(sn.Events) {
					t.Fatalf("window %d: %d events, want %d", n, len(sn.Events), len(wantEv))
				}
				for i := range wantEv {
					if !bytes.Equal(wantEv[i], sn.Events[i]) {
						t.Fatalf("window %d: event %d:\n got %.300s\nwant %.300s", n, i, sn.Events[i], wantEv[i])
					}
				}
				// The windowed view is the whole one's suffix.
				var full, win struct{ Messages []json.RawMessage }
				mustJSON(t, want.AppendView(nil), &full)
				mustJSON(t, sn.View, &win)
				if from := len(full.Messages) - min(n, len(full.Messages)); len(win.Messages) != len(full.Messages)-from ||
					!bytes.Equal(win.Messages[0], full.Messages[from]) {
					t.Fatalf("window %d: %d messages held of %d", n, len(win.Messages), len(full.Messages))
				}
			}

			if loads := counter(t, cfg.Metrics.Loads); cold && loads < 3 {
				t.Fatalf("%v checkpoint loads for 3 windowed requests of an evicted thread", loads)
			}

			// Pages, from the newest back to the first, concatenated.
			var all struct{ Messages []json.RawMessage }
			mustJSON(t, want.AppendView(nil), &all)
			var got []json.RawMessage
			before := ""
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("paging does not end")
				}
				p, err := wire.ParsePage(ask(wire.SnapRequest{Page: &wire.PageRequest{Before: before, Limit: 97}}))
				if err != nil {
					t.Fatal(err)
				}
				if p.Seq != want.Seq() || p.Total != len(all.Messages) || p.End-p.First != len(p.Messages) || len(p.Messages) > 97 {
					t.Fatalf("page before %q: seq %d, [%d, %d) of %d with %d messages", before, p.Seq, p.First, p.End, p.Total, len(p.Messages))
				}
				got = append(append([]json.RawMessage(nil), p.Messages...), got...)
				if p.First == 0 {
					if p.Before != "" {
						t.Fatalf("the first page has a cursor %q", p.Before)
					}
					break
				}
				if p.Before == "" {
					t.Fatalf("page [%d, %d) has no cursor", p.First, p.End)
				}
				before = p.Before
			}
			if len(got) != len(all.Messages) {
				t.Fatalf("pages hold %d messages, the offline view %d", len(got), len(all.Messages))
			}
			for i := range got {
				if !bytes.Equal(got[i], all.Messages[i]) {
					t.Fatalf("message %d differs:\n got %s\nwant %s", i, got[i], all.Messages[i])
				}
			}

			// Error paths: an unknown cursor, a malformed body.
			msg := ask(wire.SnapRequest{Page: &wire.PageRequest{Before: "no-such-message", Limit: 5}})
			if kind := msg.Header.Get(wire.HeaderErrorKind); kind != wire.SnapErrNoMessage {
				t.Fatalf("unknown before: error kind %q, want %q", kind, wire.SnapErrNoMessage)
			}
			if _, err := wire.ParsePage(msg); err == nil || !strings.Contains(err.Error(), "no-such-message") {
				t.Fatalf("unknown before: ParsePage = %v", err)
			}
			bad, err := nc.Request(subj, []byte(`{"window":0,"page":{"limit":-1}}`), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if kind := bad.Header.Get(wire.HeaderErrorKind); kind != wire.SnapErrBadRequest {
				t.Fatalf("malformed body: error kind %q, want %q", kind, wire.SnapErrBadRequest)
			}
		})
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %.200s", err, b)
	}
}
