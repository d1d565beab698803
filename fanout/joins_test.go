package fanout

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
)

// stallSnapshots makes th answer its snapshot requests only once release
// is closed; the returned channel receives a value per request.
func stallSnapshots(t *testing.T, th *testThread, release <-chan struct{}) <-chan struct{} {
	t.Helper()
	requested := make(chan struct{}, 16)
	subj := th.sub.Subject
	if err := th.sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	sub, err := th.nc.Subscribe(subj, func(m *nats.Msg) {
		select {
		case requested <- struct{}{}:
		default:
		}
		go func() { <-release; th.answer(m) }()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := th.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return requested
}

// opening is a stream request in flight: its response (nil with the
// status when it was refused) arrives on done.
type opening struct {
	done   chan struct{}
	c      *sseClient
	status int
	cancel context.CancelFunc
}

func openAsync(t *testing.T, url, tok string) *opening {
	ctx, cancel := context.WithCancel(context.Background())
	o := &opening{done: make(chan struct{}), cancel: cancel}
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	go func() {
		defer close(o.done)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return // cancelled
		}
		o.status = resp.StatusCode
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return
		}
		o.c = &sseClient{resp: resp, br: newBufReader(resp.Body), cancel: cancel}
	}()
	t.Cleanup(func() {
		cancel()
		<-o.done
		if o.c != nil {
			o.c.resp.Body.Close()
		}
	})
	return o
}

func (o *opening) opened(d time.Duration) bool {
	select {
	case <-o.done:
		return true
	case <-time.After(d):
		return false
	}
}

// With MaxJoins 1, a stream whose snapshot has not come holds the one join
// slot: the next stream waits (its response has not begun) until the first
// has written its snapshot, and then joins. A client that gives up while
// waiting leaves the slot as it was; a server that drains answers the
// waiting 503.
func TestJoinSlots(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	slow := newTestThread(t, connect(t, ns), "acme", "slow")
	slow.publish(t, "a;")
	release := make(chan struct{})
	requested := stallSnapshots(t, slow, release)
	fast := newTestThread(t, connect(t, ns), "acme", "fast")
	fast.publish(t, "b;")
	s, hs := newServer(t, nc, func(c *Config) { c.MaxJoins = 1 })
	tok := token(t, "acme")

	first := openAsync(t, hs.URL+"/v1/threads/slow/events", tok)
	select {
	case <-requested: // the first stream holds the slot, waiting for its snapshot
	case <-time.After(5 * time.Second):
		t.Fatal("no snapshot request for the first stream")
	}
	second := openAsync(t, hs.URL+"/v1/threads/fast/events", tok)
	gaveUp := openAsync(t, hs.URL+"/v1/threads/fast/events", tok)
	if second.opened(300 * time.Millisecond) {
		t.Fatalf("a second stream began (status %d) while the one join slot was held", second.status)
	}
	gaveUp.cancel()
	<-gaveUp.done

	close(release)
	if !first.opened(5*time.Second) || first.c == nil {
		t.Fatalf("first stream: status %d", first.status)
	}
	var a aguiModel
	a.follow(t, first.c, slow.Text, 5*time.Second)
	if !second.opened(5 * time.Second) {
		t.Fatal("the second stream did not begin after the first wrote its snapshot")
	}
	if second.c == nil {
		t.Fatalf("second stream: status %d", second.status)
	}
	var b aguiModel
	b.follow(t, second.c, fast.Text, 5*time.Second)
	if b.snapshots != 1 {
		t.Fatalf("second stream: %d snapshots, want 1", b.snapshots)
	}
	// A thread never written, over WebSocket: the join has nothing to
	// write, and gives its slot back all the same.
	newTestThread(t, connect(t, ns), "acme", "empty").unknown = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/threads/empty/events",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	// The slots taken by the joined streams were given back, so the next
	// join is admitted while they run.
	third := openAsync(t, hs.URL+"/v1/threads/fast/events", tok)
	if !third.opened(5*time.Second) || third.c == nil {
		t.Fatalf("a join after the others: status %d (did one keep its slot?)", third.status)
	}
	var c aguiModel
	c.follow(t, third.c, fast.Text, 5*time.Second)
	n, sum := histogram(t, s.Metrics().JoinWait)
	if n != 4 {
		t.Fatalf("join waits observed %d, want 4 (the stream that gave up is not one)", n)
	}
	// The second stream waited out the first's stalled snapshot for its
	// slot: the 300 ms the test held it, less what the request took to
	// reach the server (a margin of 50 ms).
	if sum < 0.25 {
		t.Fatalf("join waits sum to %.3fs, want about the 0.3s the second stream was held", sum)
	}
	// Four streams made their first write: the first and second, the
	// empty thread's and the third. Their joins hold both stalls: the
	// first stream's snapshot and the second's wait for it.
	n, sum = histogram(t, s.Metrics().Join)
	if n != 4 {
		t.Fatalf("joins observed %d, want 4 (the stream that gave up never joined)", n)
	}
	if sum < 0.5 {
		t.Fatalf("joins sum to %.3fs, want about the 2 × 0.3s the first two were held", sum)
	}

	// A stream waiting for a slot when the server drains is refused.
	stall := make(chan struct{})
	defer close(stall)
	stuck := newTestThread(t, connect(t, ns), "acme", "stuck")
	stuckReq := stallSnapshots(t, stuck, stall)
	openAsync(t, hs.URL+"/v1/threads/stuck/events", tok)
	select {
	case <-stuckReq:
	case <-time.After(5 * time.Second):
		t.Fatal("no snapshot request for the stalled thread")
	}
	waiting := openAsync(t, hs.URL+"/v1/threads/fast/events", tok)
	if waiting.opened(300 * time.Millisecond) {
		t.Fatalf("a stream began (status %d) while the join slot was held", waiting.status)
	}
	s.Drain()
	if !waiting.opened(5*time.Second) || waiting.status != http.StatusServiceUnavailable {
		t.Fatalf("waiting stream at drain: status %d, want 503", waiting.status)
	}
}
