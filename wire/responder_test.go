package wire

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/internal/testsupport/natstest"
)

// serve answers requests on subject with a body of the length they ask
// for, through respond.
func serve(t *testing.T, nc *nats.Conn, subject string, respond func(reply string, body []byte) error) {
	t.Helper()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		n, _ := strconv.Atoi(string(m.Data))
		if err := respond(m.Reply, randomBody(n)); err != nil {
			t.Errorf("respond: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestResponderWindows: replies of one message, of one window and of many
// windows all arrive whole, and nothing stays held after.
func TestResponderWindows(t *testing.T) {
	ns := startNATS(t, 8<<10)
	resp, req := connect(t, ns), connect(t, ns)
	r, err := NewResponder(resp, ResponderConfig{Window: 12 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	serve(t, resp, "snap", func(reply string, body []byte) error {
		return r.Respond(reply, nats.Header{"Tc-Seq": {"9"}}, body)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range []int{5, r.PartSize() + 1, 12 << 10, 12<<10 + 1, 100 << 10, 1 << 20} {
		m, err := Request(ctx, req, "snap", []byte(strconv.Itoa(n)), 0)
		if err != nil {
			t.Fatalf("len %d: %v", n, err)
		}
		if !bytes.Equal(m.Data, randomBody(n)) || m.Header.Get("Tc-Seq") != "9" || m.Header.Get(HeaderPartMore) != "" {
			t.Fatalf("len %d: %d bytes, header %v", n, len(m.Data), m.Header)
		}
	}
	if n := r.Held(); n != 0 {
		t.Errorf("%d replies still held", n)
	}
}

// TestResponderSlowConsumer: with a server whose max_pending is 1 MiB, an
// 8 MiB reply sent in parts at once closes the requester's connection as a
// slow consumer; sent by a Responder, window by window, it arrives.
func TestResponderSlowConsumer(t *testing.T) {
	ns := natstest.Start(t, natstest.NoJetStream, natstest.MaxPayload(64<<10), natstest.MaxPending(1<<20))
	resp := connect(t, ns)
	const n = 8 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	blast := connect(t, ns)
	serve(t, resp, "blast", func(reply string, body []byte) error {
		return Publish(resp, &nats.Msg{Subject: reply, Data: body}, PartSize(resp.MaxPayload()))
	})
	if _, err := Request(ctx, blast, "blast", []byte(strconv.Itoa(n)), 0); err == nil {
		t.Log("the blast got through: the requester drained fast enough this time")
	} else if ns.NumSlowConsumers() == 0 {
		t.Fatalf("blast: %v, and no slow consumer", err)
	}

	r, err := NewResponder(resp, ResponderConfig{Window: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	serve(t, resp, "paced", func(reply string, body []byte) error { return r.Respond(reply, nil, body) })
	before := ns.NumSlowConsumers()
	req := connect(t, ns)
	for range 3 {
		m, err := Request(ctx, req, "paced", []byte(strconv.Itoa(n)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Data, randomBody(n)) {
			t.Fatal("body differs")
		}
	}
	if d := ns.NumSlowConsumers() - before; d != 0 {
		t.Errorf("%d slow consumers with windows", d)
	}
}

// TestResponderLimits: a window asked for after HoldTTL fails the request
// with ErrPartLost; replies beyond MaxHeld are refused.
func TestResponderLimits(t *testing.T) {
	ns := startNATS(t, 8<<10)
	resp, req := connect(t, ns), connect(t, ns)
	r, err := NewResponder(resp, ResponderConfig{Window: 8 << 10, HoldTTL: time.Second, MaxHeld: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Read the first window by hand and ask for the next too late.
	inbox := req.NewInbox()
	sub, _ := req.SubscribeSync(inbox)
	_ = req.Flush()
	if err := r.Respond(inbox, nil, randomBody(100<<10)); err != nil {
		t.Fatal(err)
	}
	if err := r.Respond("elsewhere", nil, randomBody(100<<10)); !errors.Is(err, ErrTooManyHeld) {
		t.Fatalf("second held reply: %v, want ErrTooManyHeld", err)
	}
	var more string
	for more == "" {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		more = m.Header.Get(HeaderPartMore)
	}
	time.Sleep(1500 * time.Millisecond)                                  // past HoldTTL
	if err := r.Respond("again", nil, randomBody(100<<10)); err != nil { // the expired one no longer counts
		t.Fatalf("after expiry: %v", err)
	}
	m, err := req.Request(more, []byte("2"), 5*time.Second)
	if err != nil || m.Header.Get(HeaderPartError) == "" {
		t.Fatalf("late window request: %v %v, want %s", m, err, HeaderPartError)
	}
}

// TestResponderGone: a responder that stops between two windows fails the
// request with ErrPartLost (which a caller retries), not ErrNoResponders
// (which says nobody answers the subject at all).
func TestResponderGone(t *testing.T) {
	ns := startNATS(t, 8<<10)
	resp, req := connect(t, ns), connect(t, ns)
	var r *Responder
	serve(t, resp, "snap", func(reply string, body []byte) error {
		err := r.Respond(reply, nil, body)
		r.Close() // gone, most often before the next window is asked for
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rq := NewRequester(req)
	defer rq.Close()
	// The responder closes right after its first window, racing the
	// requester's ask for the second: an exchange that the responder
	// finished first (nil) says nothing, and is tried again; any error
	// other than ErrPartLost fails.
	for _, tt := range []struct {
		name string
		req  func() error
	}{
		{"own subscription", func() error {
			_, err := Request(ctx, req, "snap", []byte(strconv.Itoa(100<<10)), 0)
			return err
		}},
		// Over a Requester's shared subscription, the server's
		// no-responders status is read from the message itself.
		{"shared", func() error {
			_, err := rq.Request(ctx, "snap", []byte(strconv.Itoa(100<<10)), 0)
			return err
		}},
	} {
		lost := false
		for range 20 {
			var err error
			if r, err = NewResponder(resp, ResponderConfig{Window: 8 << 10}); err != nil {
				t.Fatal(err)
			}
			if err := tt.req(); err != nil {
				if !errors.Is(err, ErrPartLost) {
					t.Fatalf("%s: got %v, want ErrPartLost", tt.name, err)
				}
				lost = true
				break
			}
		}
		if !lost {
			t.Errorf("%s: 20 of 20 exchanges finished before the responder closed", tt.name)
		}
	}
}
