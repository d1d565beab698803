package wire

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/testsupport/natstest"
)

// TestLeaderLast: the last message on a subject, with its sequence, headers
// and data, as the stream stores it; ErrNoStoredMsg for a subject with
// none; the server's error for a stream that does not exist; the caller's
// context bounds the request.
func TestLeaderLast(t *testing.T) {
	ns := natstest.Start(t)
	nc := natstest.Connect(t, ns.ClientURL())
	js := natstest.JetStream(t, nc)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
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
	// Nobody answers another API prefix: the request times out.
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if _, err := LeaderLast(short, nc, "$JS.elsewhere.API.", "S", "s.a"); err == nil {
		t.Error("request to an API nobody serves succeeded")
	}
}
