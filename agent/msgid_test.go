package agent_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/threadcast/threadcast/agent"
)

// TestPublishWithIDStoresOnce publishes the same events with the same ids
// from two Publishers (as a client's retry after a crash would reach a new
// process): the stream holds each event once, alone in its message, in
// order, and the second round's acks say Duplicate.
func TestPublishWithIDStoresOnce(t *testing.T) {
	env := startJS(t, false)
	ctx := testCtx(t)
	var events [][]byte
	for i := range 20 {
		events = append(events, contentEvent("m", i))
	}
	id := func(i int) string { return fmt.Sprintf("test-key.%d", i) }
	for round, dup := range []bool{false, true} {
		p, err := agent.New(env.nc, agent.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		var futs []*agent.Future
		n := len(events)
		if round == 0 {
			n = 12 // the first attempt was cut after 12 events
		}
		for i := range n {
			f, err := p.PublishWithID(ctx, "acme", "t1", events[i], id(i))
			if err != nil {
				t.Fatal(err)
			}
			futs = append(futs, f)
		}
		for i, f := range futs {
			ack, err := f.Wait(ctx)
			if err != nil {
				t.Fatalf("round %d event %d: %v", round, i, err)
			}
			if want := dup && i < 12; ack.Duplicate != want {
				t.Errorf("round %d event %d: Duplicate %v, want %v", round, i, ack.Duplicate, want)
			}
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	msgs := readStream(t, env.js)
	if len(msgs) != len(events) {
		t.Fatalf("%d messages stored, want %d", len(msgs), len(events))
	}
	for i, m := range msgs {
		if len(m.events) != 1 || !bytes.Equal(m.events[0], events[i]) {
			t.Errorf("message %d holds %q, want %q", i, m.events, events[i])
		}
		if got := m.header.Get("Nats-Msg-Id"); got != id(i) {
			t.Errorf("message %d: Nats-Msg-Id %q, want %q", i, got, id(i))
		}
	}
}

// TestPublishWithIDBatchesAround checks that unkeyed events published
// around keyed ones on the same thread still batch among themselves but
// never share a message with a keyed one.
func TestPublishWithIDBatchesAround(t *testing.T) {
	env := startJS(t, false)
	ctx := testCtx(t)
	p, err := agent.New(env.nc, agent.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	var futs []*agent.Future
	for i := range 30 {
		var f *agent.Future
		if i%10 == 5 {
			f, err = p.PublishWithID(ctx, "acme", "t1", contentEvent("m", i), fmt.Sprintf("k.%d", i))
		} else {
			f, err = p.Publish(ctx, "acme", "t1", contentEvent("m", i))
		}
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var all [][]byte
	for _, m := range readStream(t, env.js) {
		keyed := bytes.HasPrefix([]byte(m.header.Get("Nats-Msg-Id")), []byte("k."))
		if keyed && len(m.events) != 1 {
			t.Errorf("keyed message %s carries %d events", m.header.Get("Nats-Msg-Id"), len(m.events))
		}
		all = append(all, m.events...)
	}
	if len(all) != 30 {
		t.Fatalf("%d events stored, want 30", len(all))
	}
	for i, ev := range all {
		if !bytes.Equal(ev, contentEvent("m", i)) {
			t.Fatalf("event %d is %q: order broken", i, ev)
		}
	}
}

// TestPublishStreamDuplicates publishes one input twice with MsgID: the
// second result counts every event as accepted and as a duplicate.
func TestPublishStreamDuplicates(t *testing.T) {
	env := startJS(t, false)
	ctx := testCtx(t)
	p, err := agent.New(env.nc, agent.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	var body bytes.Buffer
	for i := range 50 {
		body.Write(contentEvent("m", i))
		body.WriteByte('\n')
	}
	opts := agent.StreamOptions{MsgID: func(i int) string { return fmt.Sprintf("s.%d", i) }, Window: 200}
	for round := range 2 {
		res, err := agent.PublishStream(ctx, p, "acme", "t1", bytes.NewReader(body.Bytes()), opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Accepted != 50 || res.Duplicates != 50*round {
			t.Errorf("round %d: accepted %d duplicates %d, want 50 and %d", round, res.Accepted, res.Duplicates, 50*round)
		}
	}
	if n := streamCount(t, env.js); n != 50 {
		t.Errorf("%d messages stored, want 50", n)
	}
}

// TestPublishWithIDNeedsID: an empty id is refused, nothing sent.
func TestPublishWithIDNeedsID(t *testing.T) {
	env := startJS(t, false)
	p, err := agent.New(env.nc, agent.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(testCtx(t))
	if _, err := p.PublishWithID(testCtx(t), "acme", "t1", contentEvent("m", 1), ""); err == nil {
		t.Fatal("an empty message id was accepted")
	}
	if n := streamCount(t, env.js); n != 0 {
		t.Errorf("%d messages stored", n)
	}
}
