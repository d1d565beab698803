package fanout

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
)

// nextData returns the next SSE message with data, skipping comments.
func nextData(t *testing.T, c *sseClient) string {
	t.Helper()
	for {
		m, err := c.next()
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if m.data != "" {
			return m.data
		}
	}
}

// expectEnd reads c up to its end hint, which must be want, with no event
// before it.
func expectEnd(t *testing.T, c *sseClient, want string) {
	t.Helper()
	for {
		m, err := c.next()
		if err != nil {
			t.Fatalf("agui stream ended without a hint: %v", err)
		}
		if m.data != "" {
			t.Fatalf("agui event instead of the end: %s", m.data)
		}
		if strings.HasPrefix(m.comment, "end ") {
			if m.comment != want {
				t.Fatalf("end hint %q, want %q", m.comment, want)
			}
			return
		}
	}
}

// loseFrame advances the thread as a frame the fanout never receives would
// (published while its connection was down), and publishes nothing after it:
// the thread goes idle, so no later Tc-Prev reveals the gap.
func (th *testThread) loseFrame(text string) {
	th.mu.Lock()
	th.seq += 5
	th.text.WriteString(text)
	th.mu.Unlock()
}

// TestReconcileFindsLostLastFrame: a frame lost just before a thread goes
// idle is found by Reconcile (nothing else would ever find it): view
// subscribers are resynchronised in place, agui streams end with a resume
// hint; a feed that is current is left alone.
func TestReconcileFindsLostLastFrame(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "idle")
	srv, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	th.publish(t, "a;")
	c := openSSE(t, hs.URL+"/v1/threads/idle/events", tok, nil)
	v := openSSE(t, hs.URL+"/v1/threads/idle/events?mode=view", tok, nil)
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
	if d := nextData(t, v); !strings.Contains(d, `"seq":2`) {
		t.Fatalf("first view: %s", d)
	}
	ctx := t.Context()
	if n := srv.hub.Reconcile(ctx); n != 0 {
		t.Fatalf("Reconcile of a current feed = %d, want 0", n)
	}

	th.loseFrame("lost;")
	if n := srv.hub.Reconcile(ctx); n != 1 {
		t.Fatalf("Reconcile after a lost frame = %d, want 1", n)
	}
	if d := nextData(t, v); !strings.Contains(d, `"type":"view","seq":7`) || !strings.Contains(d, "a;lost;") {
		t.Fatalf("view after Reconcile: %s", d)
	}
	expectEnd(t, c, "end reason=resync after=2")
	if got := counterValue(srv.m.Drops.WithLabelValues(ReasonGap)); got != 2 {
		t.Errorf("gap drops = %v, want 2 (one per subscriber)", got)
	}
	if n := srv.hub.Reconcile(ctx); n != 0 {
		t.Errorf("second Reconcile = %d, want 0", n)
	}
}

// TestServerReconcilesAfterReconnect: the NATS server restarts while a
// thread's last frame is published; once the fanout's connection is back,
// Server.Run reconciles on its own and the view subscriber gets the view
// with the lost change.
func TestServerReconcilesAfterReconnect(t *testing.T) {
	ns := natstest.Start(t, natstest.NoJetStream)
	dial := func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	nc := dial()
	th := newTestThread(t, dial(), "acme", "rc")
	srv, _ := newServer(t, nc, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- srv.Run(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() { cancel(); <-runDone })
	tok := token(t, "acme")
	th.publish(t, "a;")
	v := openSSE(t, "http://"+ln.Addr().String()+"/v1/threads/rc/events?mode=view", tok, nil)
	if d := nextData(t, v); !strings.Contains(d, `"seq":2`) {
		t.Fatalf("first view: %s", d)
	}

	ns.Stop()
	th.loseFrame("lost;")
	ns.Restart()
	got := make(chan string, 1)
	go func() {
		m, err := v.next()
		for err == nil && m.data == "" {
			m, err = v.next()
		}
		got <- m.data
	}()
	select {
	case d := <-got:
		if !strings.Contains(d, `"type":"view","seq":7`) || !strings.Contains(d, "a;lost;") {
			t.Fatalf("view after the reconnect: %s", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no resync after the reconnect")
	}
}

// TestReconcileRetriesUnreachable: a feed whose check could not reach the
// pipeline (no snapshot responder) is checked again by the next periodic
// pass, which looks only at suspect feeds and feeds that dropped frames.
func TestReconcileRetriesUnreachable(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "away")
	srv, hs := newServer(t, nc, nil)
	th.publish(t, "a;")
	v := openSSE(t, hs.URL+"/v1/threads/away/events?mode=view", token(t, "acme"), nil)
	if d := nextData(t, v); !strings.Contains(d, `"seq":2`) {
		t.Fatalf("first view: %s", d)
	}
	ctx := t.Context()
	if n := srv.hub.reconcile(ctx, false); n != 0 {
		t.Fatalf("periodic pass with nothing dropped = %d, want 0", n)
	}
	if err := th.sub.Unsubscribe(); err != nil { // the ingest is away
		t.Fatal(err)
	}
	th.loseFrame("lost;")
	if n := srv.hub.Reconcile(ctx); n != 0 {
		t.Fatalf("Reconcile without a pipeline = %d, want 0", n)
	}
	sub, err := th.nc.Subscribe(th.sub.Subject, th.answer) // back
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := th.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := srv.hub.reconcile(ctx, false); n != 1 {
		t.Fatalf("periodic pass after the pipeline returned = %d, want 1 (the suspect feed)", n)
	}
	if d := nextData(t, v); !strings.Contains(d, `"type":"view","seq":7`) || !strings.Contains(d, "a;lost;") {
		t.Fatalf("view after the retry: %s", d)
	}
	if n := srv.hub.reconcile(ctx, false); n != 0 {
		t.Errorf("periodic pass after the retry = %d, want 0", n)
	}
}
