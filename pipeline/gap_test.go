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
