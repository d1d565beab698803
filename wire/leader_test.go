package wire

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/testsupport/natstest"
)

// streamS starts a NATS server with JetStream and a stream S on s.>, and
// returns it, a connection and its JetStream.
func streamS(t *testing.T) (*natstest.Server, *nats.Conn, jetstream.JetStream) {
	ns := natstest.Start(t)
	nc := natstest.Connect(t, ns.ClientURL())
	js := natstest.JetStream(t, nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	return ns, nc, js
}

// TestLeaderLast: the last message on a subject, with its sequence, headers
// and data, as the stream stores it; ErrNoStoredMsg for a subject with
// none; the server's error for a stream that does not exist; the caller's
// context bounds the request.
func TestLeaderLast(t *testing.T) {
	_, nc, js := streamS(t)
	ctx := t.Context()
	for _, m := range []*nats.Msg{
		{Subject: "s.a", Data: []byte("a1")},
		{Subject: "s.b", Data: []byte("b1")},
		{Subject: "s.a", Data: []byte("a2"), Header: nats.Header{"K": {"v"}}},
	} {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	m, err := LeaderLast(ctx, nc, "$JS.API.", "S", "s.a")
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "s.a" || m.Seq != 3 || string(m.Data) != "a2" || m.Header.Get("K") != "v" {
		t.Errorf("last of s.a = %+v, want seq 3, a2, K: v", m)
	}
	if m, err := LeaderLast(ctx, nc, "$JS.API.", "S", "s.b"); err != nil || m.Seq != 2 || m.Header != nil {
		t.Errorf("last of s.b = %+v, %v; want seq 2 without headers", m, err)
	}
	if _, err := LeaderLast(ctx, nc, "$JS.API.", "S", "s.none"); !errors.Is(err, ErrNoStoredMsg) {
		t.Errorf("subject with no message: %v, want ErrNoStoredMsg", err)
	}
	if _, err := LeaderLast(ctx, nc, "$JS.API.", "NOPE", "s.a"); err == nil || errors.Is(err, ErrNoStoredMsg) || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("stream that does not exist: %v, want the server's error", err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := LeaderLast(ended, nc, "$JS.API.", "S", "s.a"); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v", err)
	}
	// Nobody serves another API prefix: no responders, answered at once
	// and not asked again.
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if _, err := LeaderLast(short, nc, "$JS.elsewhere.API.", "S", "s.a"); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("request to an API nobody serves: %v, want no responders", err)
	}
}

// TestLeaderLastAsksAgain: a request that goes unanswered (as one in flight
// when the stream's leader goes away) is sent again after
// leaderAttemptTimeout, and the read succeeds within its deadline. The API
// here is a relay to the real one that drops the first request it gets.
func TestLeaderLastAsksAgain(t *testing.T) {
	ns, nc, js := streamS(t)
	ctx := t.Context()
	if _, err := js.Publish(ctx, "s.a", []byte("a1")); err != nil {
		t.Fatal(err)
	}
	relay := natstest.Connect(t, ns.ClientURL())
	var asked atomic.Int32
	if _, err := relay.Subscribe("$JS.relay.API.STREAM.MSG.GET.S", func(m *nats.Msg) {
		if asked.Add(1) == 1 {
			return // lost
		}
		reply, err := relay.Request("$JS.API.STREAM.MSG.GET.S", m.Data, time.Second)
		if err != nil {
			t.Errorf("relay: %v", err)
			return
		}
		_ = m.Respond(reply.Data)
	}); err != nil {
		t.Fatal(err)
	}
	if err := relay.Flush(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 3*leaderAttemptTimeout)
	defer cancel()
	m, err := LeaderLast(rctx, nc, "$JS.relay.API.", "S", "s.a")
	if err != nil {
		t.Fatalf("read with its first request lost: %v (requests seen: %d)", err, asked.Load())
	}
	if m.Seq != 1 || string(m.Data) != "a1" || asked.Load() != 2 {
		t.Errorf("got seq %d %q after %d requests, want seq 1 a1 after 2", m.Seq, m.Data, asked.Load())
	}
}
