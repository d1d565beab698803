package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/wire"
)

// A stored message with no event in it (an empty body, sent with plain
// `nats pub`) is dead-lettered and changes nothing: no frame is published
// for it, and the thread's next frame follows its last one.
func TestEmptyMessage(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	startIngest(t, nc, cfg)
	tok := wire.EncodeThread("em")
	frames, err := nc.SubscribeSync(wire.ViewSubject("acme", tok))
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := nc.SubscribeSync(wire.DLQSubject("acme", tok))
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := wire.EventSubject("acme", "em")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub := func(body string) {
		t.Helper()
		if _, err := js.Publish(ctx, subj, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	pub(`{"type":"RUN_STARTED","threadId":"em","runId":"r1"}`)
	first, err := frames.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pub("")
	pub(" \n ")
	for range 2 {
		m, err := dlq.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("no dead letter for an empty message: %v", err)
		}
		if k := m.Header.Get(wire.HeaderErrorKind); k != wire.ErrKindDecode {
			t.Errorf("dead letter kind %q, want %q", k, wire.ErrKindDecode)
		}
	}
	pub(`{"type":"RUN_FINISHED","threadId":"em","runId":"r1"}`)
	next, err := frames.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if prev, seq := next.Header.Get(wire.HeaderPrev), first.Header.Get(wire.HeaderSeq); prev != seq {
		t.Errorf("the frame after the empty messages has Tc-Prev %s, Tc-Seq %s; want it to follow the frame of seq %s",
			prev, next.Header.Get(wire.HeaderSeq), seq)
	}
}
