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

// The fenced store remembers a revision only for the shard's hot threads:
// reading a checkpoint to answer a snapshot of a cold thread (one at a
// time or preloaded together), or to preload a thread the batch then does
// not take (a redelivery), leaves no revision behind, so the store's memory
// does not grow with every thread ever served. A hot thread's revision
// stays: it fences the thread's next write.
func TestFencedRevsHoldOnlyHotThreads(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	cfg := testConfig()
	cfg.Tap = false
	store := newTestFencedStore(t, nc, cfg.Bucket, nil)
	sh := newShard(0, &cfg, discardLogger(), NewMetrics(nil), &countPub{}, store)
	for p := range cfg.Partitions {
		sh.parts[p] = &partState{p: p, dirty: make(map[*hotThread]struct{})}
	}
	ctx := context.Background()
	var acked []uint64
	msg := func(seq uint64, thread string) *testMsg {
		tok := wire.EncodeThread(thread)
		return &testMsg{subject: wire.StoredSubject(wire.Partition("acme", tok, cfg.Partitions), "acme", tok), seq: seq, acked: &acked,
			data: fmt.Appendf(nil, `{"type":"RUN_STARTED","threadId":%q,"runId":"r"}`, thread)}
	}
	snap := func(thread string) snapGroup {
		tok := wire.EncodeThread(thread)
		subj := wire.SnapSubject(wire.Partition("acme", tok, cfg.Partitions), "acme", tok)
		return snapGroup{subject: subj, reqs: []*nats.Msg{{Subject: subj, Reply: "_INBOX.x"}}}
	}

	// One hot thread, checkpointed; and checkpoints of threads that are
	// not in memory (written by a shard that is gone).
	sh.now = time.Now()
	sh.handle(ctx, msg(1, "hot"), 0)
	sh.flush(ctx, true)
	hotKey := wire.CheckpointKey("acme", wire.EncodeThread("hot"))
	for i := range 10 {
		if err := putWait(t, store.kvStore, wire.CheckpointKey("acme", wire.EncodeThread(fmt.Sprintf("stored%d", i))), "x"); err != nil {
			t.Fatal(err)
		}
	}

	for i := range 100 { // answered one at a time: snapshot reads each
		sh.snapshot(ctx, snap(fmt.Sprintf("cold%d", i)))
	}
	var gs []snapGroup // answered together: preloadCold reads them
	for i := range 10 {
		gs = append(gs, snap(fmt.Sprintf("stored%d", i)), snap(fmt.Sprintf("new%d", i)))
	}
	gs = append(gs, snap("hot"))
	sh.preloadCold(ctx, gs)
	for _, g := range gs {
		sh.snapshot(ctx, g)
	}
	clear(sh.cold)
	// Redeliveries of threads not in memory: preloaded, then skipped.
	for _, ps := range sh.parts {
		ps.lastSeq = 1000
	}
	var ds []delivery
	for i := range 10 {
		ds = append(ds, delivery{msg: msg(uint64(500+i), fmt.Sprintf("redelivered%d", i))})
	}
	sh.preload(ctx, ds)
	for _, d := range ds {
		sh.handle(ctx, d.msg, 0)
	}
	sh.dropPreloaded()

	if len(sh.threads) != 1 {
		t.Fatalf("%d hot threads, want 1", len(sh.threads))
	}
	if _, ok := store.revs[hotKey]; len(store.revs) != 1 || !ok {
		t.Errorf("the fenced store remembers %d keys (the hot thread's among them: %t), want only the hot thread's",
			len(store.revs), ok)
	}
}
