package pipeline

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/wire"
)

func fetchN(t *testing.T, c jetstream.Consumer, n int) []jetstream.Msg {
	t.Helper()
	b, err := c.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for m := range b.Messages() {
		out = append(out, m)
	}
	if len(out) != n {
		t.Fatalf("fetched %d, want %d (%v)", len(out), n, b.Error())
	}
	return out
}

func streamSeq(t *testing.T, m jetstream.Msg) uint64 {
	t.Helper()
	meta, err := m.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	return meta.Sequence.Stream
}

// TestConsumerEpochs: each ownership of a partition binds a consumer of its
// own (epoch name) starting after the highest ack floor of the earlier
// ones, which it deletes; a stale owner's AckAll then reaches nothing and
// cannot acknowledge the new owner's messages.
func TestConsumerEpochs(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	cfg := testConfig()
	stream, _, err := EnsureStreams(ctx, js, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Ten messages on partition 1.
	var thread string
	for k := 0; ; k++ {
		thread = fmt.Sprintf("t%d", k)
		if wire.Partition("acme", wire.EncodeThread(thread), cfg.Partitions) == 1 {
			break
		}
	}
	subj, _ := wire.EventSubject("acme", thread)
	var seqs []uint64
	for i := range 10 {
		ack, err := js.Publish(ctx, subj, []byte(fmt.Sprintf(`{"type":"CUSTOM","name":"n","value":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}

	// Owner A (epoch 1) gets everything, acks the first three.
	a := cfg
	a.ConsumerEpoch = 1
	consA, err := bindConsumer(ctx, stream, &a, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	msgsA := fetchN(t, consA, 10)
	if err := msgsA[2].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	// Owner B (epoch 2) takes over: starts after A's floor, A's consumer goes.
	b := cfg
	b.ConsumerEpoch = 2
	consB, err := bindConsumer(ctx, stream, &b, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	names, err := partitionConsumers(ctx, stream, &cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"ingest-p1-e2"}) {
		t.Fatalf("consumers of partition 1 after the takeover: %v", names)
	}
	msgsB := fetchN(t, consB, 7)
	if got := streamSeq(t, msgsB[0]); got != seqs[3] {
		t.Fatalf("new owner starts at seq %d, want %d (after the old floor)", got, seqs[3])
	}
	// A, stale, acks everything it was delivered: it must not reach B.
	_ = msgsA[9].Ack()
	time.Sleep(100 * time.Millisecond)
	info, err := consB.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != seqs[2] {
		t.Fatalf("new owner's ack floor %d after a stale ack, want %d (untouched)", info.AckFloor.Stream, seqs[2])
	}
	// B acks up to the 6th; a static-mode start (epoch 0) continues after
	// B's floor and removes the epoch consumer.
	if err := msgsB[2].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	st := cfg
	consS, err := bindConsumer(ctx, stream, &st, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := streamSeq(t, fetchN(t, consS, 4)[0]); got != seqs[6] {
		t.Fatalf("static start at seq %d, want %d", got, seqs[6])
	}
	names, _ = partitionConsumers(ctx, stream, &cfg, 1)
	if !slices.Equal(names, []string{"ingest-p1"}) {
		t.Fatalf("consumers after the static start: %v", names)
	}
}

// TestPartitionConsumersNames: only p's static and epoch names match, not
// another partition's with the same digits as a prefix.
func TestPartitionConsumersNames(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	cfg := testConfig()
	cfg.Partitions = 16
	stream, _, err := EnsureStreams(ctx, js, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"ingest-p1", "ingest-p1-e7", "ingest-p10", "ingest-p10-e1", "ingest-p1-ex", "other-p1"} {
		if _, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: n, AckPolicy: jetstream.AckAllPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := partitionConsumers(ctx, stream, &cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"ingest-p1", "ingest-p1-e7"}; !slices.Equal(got, want) {
		t.Fatalf("partition 1 consumers %v, want %v", got, want)
	}
}

// TestLeasedIngestReadyHeld: a LeasedIngest is ready only once its first
// lease pass is over and every partition whose lease it holds runs with
// its consumer bound — not while a claimed partition has not started.
func TestLeasedIngestReadyHeld(t *testing.T) {
	bound := NewRestarting(nil)
	bound.cur = &fakeService{ready: true}
	li := &LeasedIngest{leases: &Leases{held: []int{0, 1}}, ins: map[int]*Restarting{0: bound}}
	if li.Ready() {
		t.Error("ready before the first lease pass")
	}
	li.started.Store(true)
	if li.Ready() {
		t.Error("ready while held partition 1 runs nothing")
	}
	li.leases.held = []int{0}
	if !li.Ready() {
		t.Error("not ready with every held partition bound")
	}
	li.leases.held = nil
	if !li.Ready() {
		t.Error("a standby holding nothing is not ready")
	}
}
