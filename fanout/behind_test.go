package fanout

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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
	waitFor(t, 10*time.Second, "the owner to be asked past its stale answers", func() bool { return asked.Load() > stale })
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
