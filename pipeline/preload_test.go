package pipeline

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/wire"
)

// slowStore is a memStore whose Gets take a while and count how many run
// at once, as reads from a store across a network overlap or not.
type slowStore struct {
	memStore
	in, most atomic.Int32
}

func (s *slowStore) Get(ctx context.Context, key string) ([]byte, error) {
	n := s.in.Add(1)
	defer s.in.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(5 * time.Millisecond)
	return s.memStore.Get(ctx, key)
}

// A batch touching many threads that are not in memory reads their
// checkpoints at once, and each thread continues from its own: the ones
// checkpointed before go on from their checkpoint, the new ones start
// empty.
func TestPreloadReadsCheckpointsTogether(t *testing.T) {
	mem := memStore{}
	ctx := context.Background()
	var acked []uint64
	msg := func(seq uint64, thread, ev string) *testMsg {
		return &testMsg{subject: wire.StoredSubject(0, "acme", thread), seq: seq, acked: &acked, data: []byte(ev)}
	}
	started := func(th string) string {
		return fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":"r"}`, th)
	}
	// Threads 0..9 are checkpointed with a run started, then evicted (a new
	// shard over the same store).
	first := unitShard(testConfig(), 0, mem)
	first.now = time.Now()
	for i := range 10 {
		th := fmt.Sprintf("t%d", i)
		first.handle(ctx, msg(uint64(i+1), th, started(th)), 0)
	}
	first.flush(ctx, true)

	store := &slowStore{memStore: mem}
	s := unitShard(testConfig(), 0, store)
	s.now = time.Now()
	var ds []delivery
	for i := range 20 { // 10 known to the store, 10 new
		th := fmt.Sprintf("t%d", i)
		ev := started(th)
		if i < 10 {
			ev = fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":"r"}`, th)
		}
		ds = append(ds, delivery{msg: msg(uint64(100+i), th, ev)})
	}
	s.preload(ctx, ds)
	if n := store.most.Load(); n < 2 {
		t.Errorf("at most %d checkpoint reads at once, want several", n)
	}
	for _, d := range ds {
		s.handle(ctx, d.msg, 0)
	}
	clear(s.preloaded)
	for i := range 20 {
		th := s.threads[threadKey{"acme", fmt.Sprintf("t%d", i)}]
		if th == nil {
			t.Fatalf("thread t%d not in memory", i)
		}
		// A checkpointed thread finished its run; a new one has one open.
		want := "running"
		if i < 10 {
			want = "finished"
		}
		if got := th.th.Status().String(); got != want || th.th.Seq() != uint64(100+i) {
			t.Errorf("t%d: status %s at seq %d, want %s at %d", i, got, th.th.Seq(), want, 100+i)
		}
	}
}

// seqPub records the Tc-Seq of each message it is given, by subject.
type seqPub struct{ seqs map[string]string }

func (p *seqPub) PublishMsg(m *nats.Msg) error {
	p.seqs[m.Subject] = m.Header.Get(wire.HeaderSeq)
	return nil
}

// Snapshot requests for many threads not in memory read their checkpoints
// together, and each is answered at its own thread's seq.
func TestPreloadColdSnapshots(t *testing.T) {
	mem := memStore{}
	ctx := context.Background()
	var acked []uint64
	first := unitShard(testConfig(), 0, mem)
	first.now = time.Now()
	for i := range 10 {
		th := fmt.Sprintf("c%d", i)
		first.handle(ctx, &testMsg{subject: wire.StoredSubject(0, "acme", th), seq: uint64(10 + i), acked: &acked,
			data: fmt.Appendf(nil, `{"type":"RUN_STARTED","threadId":%q,"runId":"r"}`, th)}, 0)
	}
	first.flush(ctx, true)

	store := &slowStore{memStore: mem}
	pub := &seqPub{seqs: map[string]string{}}
	cfg := testConfig()
	cfg.Tap = false
	s := newShard(0, &cfg, discardLogger(), NewMetrics(nil), pub, store)
	for p := range cfg.Partitions {
		s.parts[p] = &partState{p: p, dirty: make(map[*hotThread]struct{})}
	}
	var gs []snapGroup
	for i := range 10 {
		tok := wire.EncodeThread(fmt.Sprintf("c%d", i))
		subj := wire.SnapSubject(wire.Partition("acme", tok, cfg.Partitions), "acme", tok)
		gs = append(gs, snapGroup{subject: subj, reqs: []*nats.Msg{{Subject: subj, Reply: fmt.Sprintf("_INBOX.%d", i)}}})
	}
	s.preloadCold(ctx, gs)
	if n := store.most.Load(); n < 2 {
		t.Errorf("at most %d checkpoint reads at once, want several", n)
	}
	for _, g := range gs {
		s.snapshot(ctx, g)
	}
	for i := range 10 {
		if got, want := pub.seqs[fmt.Sprintf("_INBOX.%d", i)], fmt.Sprint(10+i); got != want {
			t.Errorf("thread c%d answered at seq %q, want %s", i, got, want)
		}
	}
	if len(s.threads) != 0 {
		t.Errorf("%d threads kept hot by snapshots of cold ones", len(s.threads))
	}
}
