package pipeline

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDeliveryGap fetches real deliveries of a consumer and checks the gap
// rule on their consumer sequences: consecutive deliveries pass, a skipped
// delivery (one lost in flight) and a repeated one (a consumer leader that
// restarted from an older state) are gaps.
func TestDeliveryGap(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "GAP", Subjects: []string{"gap.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := js.Publish(ctx, "gap.x", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 5 {
		t.Fatalf("fetched %d", len(msgs))
	}
	// The sequences read from the reply subject are Metadata's.
	for _, m := range msgs {
		meta, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		sseq, cseq, ok := ackReplySeqs(m.Reply())
		if !ok || sseq != meta.Sequence.Stream || cseq != meta.Sequence.Consumer {
			t.Errorf("ackReplySeqs(%q) = %d, %d, %v; Metadata says %d, %d", m.Reply(), sseq, cseq, ok, meta.Sequence.Stream, meta.Sequence.Consumer)
		}
	}
	tests := []struct {
		name    string
		give    []int // indexes of msgs, delivered in this order
		wantGap int   // index into give of the first gap; -1: none
	}{
		{name: "in order", give: []int{0, 1, 2, 3, 4}, wantGap: -1},
		{name: "first delivery may be any", give: []int{2, 3, 4}, wantGap: -1},
		{name: "one lost in flight", give: []int{0, 1, 3, 4}, wantGap: 2},
		{name: "repeated", give: []int{0, 1, 2, 1}, wantGap: 3},
	}
	for _, tt := range tests {
		var last uint64
		got := -1
		for i, k := range tt.give {
			if _, err := deliveryGap(msgs[k], &last); err != nil {
				if !errors.Is(err, ErrDeliveryGap) {
					t.Errorf("%s: %v is not ErrDeliveryGap", tt.name, err)
				}
				got = i
				break
			}
		}
		if got != tt.wantGap {
			t.Errorf("%s: gap at %d, want %d", tt.name, got, tt.wantGap)
		}
	}
	// Not a JetStream message: no verdict (the shard reports it).
	var last uint64 = 7
	if seq, err := deliveryGap(plainMsg{}, &last); err != nil || last != 7 || seq != 0 {
		t.Errorf("plain message: %v, last %d, seq %d", err, last, seq)
	}
}

// plainMsg is a jetstream.Msg without JetStream metadata.
type plainMsg struct{ jetstream.Msg }

func (plainMsg) Metadata() (*jetstream.MsgMetadata, error) { return nil, nats.ErrNotJSMessage }

func (plainMsg) Reply() string { return "" }

// fakeService ends its run with the outcome given, or when ctx ends.
type fakeService struct {
	outcome error
	ready   bool
}

func (f *fakeService) Run(ctx context.Context, _ time.Duration) error {
	f.ready = true
	if f.outcome != nil {
		return f.outcome
	}
	<-ctx.Done()
	return nil
}
func (f *fakeService) Ready() bool { return f.ready }
func (f *fakeService) Lag() uint64 { return 7 }

// TestRestarting: a Restarting builds a fresh service when one ends with
// ErrDeliveryGap, and stops on any other outcome, on a build error, and
// when ctx ends.
func TestRestarting(t *testing.T) {
	gap := fmt.Errorf("%w: test", ErrDeliveryGap)
	other := errors.New("other")
	tests := []struct {
		name         string
		give         []error // outcome of each build's run; nil = runs until ctx ends
		buildErrAt   int     // build number (1-based) that fails; 0: none
		cancel       bool
		wantErr      error
		wantRestarts int
	}{
		{name: "gaps then other", give: []error{gap, gap, other}, wantErr: other, wantRestarts: 2},
		{name: "no gap", give: []error{other}, wantErr: other},
		{name: "build fails after a gap", give: []error{gap}, buildErrAt: 2, wantErr: errBuild, wantRestarts: 1},
		{name: "until ctx ends", give: []error{gap, nil}, cancel: true, wantRestarts: 1},
	}
	for _, tt := range tests {
		builds := 0
		r := NewRestarting(func() (Service, error) {
			builds++
			if builds == tt.buildErrAt {
				return nil, errBuild
			}
			return &fakeService{outcome: tt.give[builds-1]}, nil
		})
		if r.Ready() || r.Lag() != 0 {
			t.Errorf("%s: ready before running", tt.name)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if tt.cancel {
			time.AfterFunc(50*time.Millisecond, cancel)
		}
		err := r.Run(ctx, time.Second)
		cancel()
		if !errors.Is(err, tt.wantErr) && !(err == nil && tt.wantErr == nil) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.wantErr)
		}
		if r.Restarts() != tt.wantRestarts {
			t.Errorf("%s: %d restarts, want %d", tt.name, r.Restarts(), tt.wantRestarts)
		}
		if tt.buildErrAt == 0 && (!r.Ready() || r.Lag() != 7) {
			t.Errorf("%s: Ready/Lag not the current service's", tt.name)
		}
	}
}

var errBuild = errors.New("build fails")

// TestAckReplySeqs: both ack subject forms, and what is not one.
func TestAckReplySeqs(t *testing.T) {
	tests := []struct {
		give         string
		wantS, wantC uint64
		wantOK       bool
	}{
		{give: "$JS.ACK.EVENTS.ingest-p3.1.4711.42.1700000000000000000.9", wantS: 4711, wantC: 42, wantOK: true},
		{give: "$JS.ACK._.ABCHASH.EVENTS.ingest-p3.2.4711.42.1700000000000000000.9.xyz", wantS: 4711, wantC: 42, wantOK: true},
		{give: "$JS.ACK.hub.ABCHASH.EVENTS.ingest-p3.1.5.6.1700000000000000000.0", wantS: 5, wantC: 6, wantOK: true},  // v2 without the token
		{give: "$JS.ACK.hub.ABCHASH.EVENTS.c.1.5.6.1700000000000000000.0.tok.more", wantS: 5, wantC: 6, wantOK: true}, // later tokens ignored
		{give: "$JS.ACK.EVENTS.c.1.x5.6.1700000000000000000.0", wantS: 0, wantC: 6, wantOK: true},                     // not a number: 0, like nats.go
		{give: "$JS.ACK.EVENTS.c.1.5.6.1700000000000000000", wantOK: false},                                           // 8 tokens
		{give: "$JS.ACK.hub.EVENTS.c.1.5.6.1700000000000000000.0", wantOK: false},                                     // 10 tokens
		{give: "$JS.NAK.EVENTS.c.1.5.6.1700000000000000000.0", wantOK: false},
		{give: "_INBOX.abc", wantOK: false},
		{give: "", wantOK: false},
	}
	for _, tt := range tests {
		s, c, ok := ackReplySeqs(tt.give)
		if s != tt.wantS || c != tt.wantC || ok != tt.wantOK {
			t.Errorf("ackReplySeqs(%q) = %d, %d, %v; want %d, %d, %v", tt.give, s, c, ok, tt.wantS, tt.wantC, tt.wantOK)
		}
	}
}
