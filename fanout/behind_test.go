package fanout

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/wire"
)

// A client that already has seq S never receives a snapshot older than S:
// after the crash of a partition's owner, the new owner answers from its
// checkpoint before it has replayed what the old owner had already
// published. The hub asks again until the owner has caught up.
func TestSnapshotBehindCursorHeldBack(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, nc, "acme", "behind")
	th.publish(t, "one;")
	old := th.seq // what the new owner's checkpoint holds
	th.publish(t, "two;")
	last := th.publish(t, "three;")
	full := th.Text()

	// The new owner: answers its first requests from the checkpoint (old
	// seq, old text), then from the caught-up view (th.answer).
	_ = th.sub.Unsubscribe()
	var asked atomic.Int32
	const stale = 3
	sub, err := nc.Subscribe(th.sub.Subject, func(m *nats.Msg) {
		if asked.Add(1) > stale {
			th.answer(m)
			return
		}
		th.mu.Lock()
		seq, text := th.seq, th.text.String()
		th.seq, th.text = old, strings.Builder{}
		th.text.WriteString("one;")
		th.mu.Unlock()
		th.answer(m)
		th.mu.Lock()
		th.seq = seq
		th.text.Reset()
		th.text.WriteString(text)
		th.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// A fresh node (no ring): the client resumes with the newest cursor.
	// It must get neither the stale snapshot nor a gap: once the owner has
	// caught up, the hub continues from the cursor, and the next frame is
	// the first thing the client reads.
	srv, hs := newServer(t, connect(t, ns), nil)
	c := openSSE(t, hs.URL+"/v1/threads/behind/events", token(t, "acme"), map[string][]string{"Last-Event-Id": {uitoa(last)}})
	testsupport.WaitFor(t, 10*time.Second, "the owner to be asked past its stale answers", func() bool { return asked.Load() > stale })
	th.publish(t, "four;")
	done := time.AfterFunc(10*time.Second, c.cancel)
	defer done.Stop()
	for {
		msg, err := c.next()
		if err != nil {
			t.Fatalf("stream ended before the next frame: %v (pipeline asked %d times)", err, asked.Load())
		}
		if strings.Contains(msg.data, "MESSAGES_SNAPSHOT") && !strings.Contains(msg.data, full) {
			t.Fatalf("a snapshot older than the client's cursor %d was sent: %s", last, msg.data)
		}
		if strings.Contains(msg.data, "one;") && !strings.Contains(msg.data, full) {
			t.Fatalf("the client's view went back: %s", msg.data)
		}
		if strings.Contains(msg.data, "four;") {
			break
		}
	}
	if got := counterValue(srv.Metrics().SnapshotRetries.WithLabelValues(RetryBehind)); got < stale {
		t.Errorf("snapshot_retries_total{reason=behind} = %v, want ≥ %d", got, stale)
	}
}

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// TestCursorAheadOfThreadAnsweredAtOnce: a Last-Event-ID (or ?after=)
// past the thread's last stored event is answered at once with a fresh
// snapshot, after one snapshot request and one look at the stream — it used
// to hold the response headers for SnapshotRetry (15 s) while the pipeline
// was asked about 70 times.
func TestCursorAheadOfThreadAnsweredAtOnce(t *testing.T) {
	ns := startNATS(t)
	const parts = 4
	startIngest(t, ns, parts)
	srv, hs := newServer(t, connect(t, ns), func(c *Config) { c.Hub.Partitions = parts })
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := wire.EventSubject("acme", "ahead")
	var last uint64
	for _, ev := range []string{
		`{"type":"RUN_STARTED","threadId":"ahead","runId":"r1"}`,
		`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"assistant","delta":"hello"}`,
	} {
		ack, err := js.Publish(context.Background(), subj, []byte(ev))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	// Count the snapshot requests the fanout makes (a second subscriber
	// sees every request; it does not answer).
	counter := connect(t, ns)
	var requests atomic.Int32
	if _, err := counter.Subscribe(wire.SnapPrefix+".>", func(*nats.Msg) { requests.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := counter.Flush(); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "the thread's view", func() bool {
		code, body := do(t, "GET", hs.URL+"/v1/threads/ahead", token(t, "acme"), "", nil)
		return code == 200 && strings.Contains(body, "hello")
	})
	requests.Store(0)
	for _, tt := range []struct {
		name string
		url  string
		hdr  map[string][]string
	}{
		{"Last-Event-ID", hs.URL + "/v1/threads/ahead/events", map[string][]string{"Last-Event-Id": {uitoa(last + 1000)}}},
		{"after", hs.URL + "/v1/threads/ahead/events?after=" + uitoa(last+5000), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := requests.Load()
			start := time.Now()
			c := openSSE(t, tt.url, token(t, "acme"), tt.hdr)
			defer c.close()
			// The join's snapshot: the open run, then the messages.
			var seen []string
			for len(seen) < 5 {
				msg, err := c.next()
				if err != nil {
					t.Fatal(err)
				}
				seen = append(seen, msg.data)
				if strings.Contains(msg.data, "MESSAGES_SNAPSHOT") {
					break
				}
			}
			if last := seen[len(seen)-1]; !strings.Contains(last, "MESSAGES_SNAPSHOT") || !strings.Contains(last, "hello") {
				t.Fatalf("read %q, want the thread's snapshot", seen)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("answered after %v", d)
			}
			if n := requests.Load() - before; n > 2 {
				t.Errorf("%d snapshot requests for one join, want at most 2", n)
			}
		})
	}
	if got := counterValue(srv.Metrics().BogusCursors); got != 2 {
		t.Errorf("bogus_cursors_total = %v, want 2", got)
	}
	if got := counterValue(srv.Metrics().SnapshotRetries.WithLabelValues(RetryBehind)); got > 2 {
		t.Errorf("snapshot_retries_total{reason=behind} = %v, want at most one per join", got)
	}
}
