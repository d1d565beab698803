package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/wire"
)

// testMsg is a delivered message for unit tests of the shard's bookkeeping
// (the integration tests use real consumers); it records acks.
type testMsg struct {
	jetstream.Msg // unused methods panic
	subject       string
	data          []byte
	seq           uint64
	acked         *[]uint64
}

func (m *testMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}}, nil
}
func (m *testMsg) Data() []byte         { return m.data }
func (m *testMsg) Headers() nats.Header { return nil }
func (m *testMsg) Subject() string      { return m.subject }
func (m *testMsg) Reply() string        { return "" } // no ack subject: not from a consumer
func (m *testMsg) Ack() error {
	*m.acked = append(*m.acked, m.seq)
	return nil
}

// unitShard is a shard owning partition p, for unit tests of its
// bookkeeping: no consumer, no tap, checkpoints in store.
func unitShard(cfg Config, p int, store CheckpointStore) *shard {
	cfg.Tap = false
	s := newShard(0, &cfg, discardLogger(), NewMetrics(nil), &countPub{}, store)
	s.parts[p] = &partState{p: p, dirty: make(map[*hotThread]struct{})}
	return s
}

// failStore fails every Get, like an unreachable KV bucket.
type failStore struct{ memStore }

func (failStore) Get(context.Context, string) ([]byte, error) {
	return nil, errors.New("store down")
}

// TestUnappliedMessageNeverAcked: when a thread cannot be loaded during a
// hard shutdown, its message is not applied — and neither it nor any later
// message of the partition is acked, while earlier ones are.
func TestUnappliedMessageNeverAcked(t *testing.T) {
	mem := memStore{}
	s := unitShard(testConfig(), 0, mem)
	var acked []uint64
	msg := func(seq uint64, thread string) *testMsg {
		return &testMsg{subject: wire.StoredSubject(0, "acme", thread), seq: seq, acked: &acked,
			data: []byte(`{"type":"RUN_STARTED","threadId":"x","runId":"r"}`)}
	}
	ctx := context.Background()
	s.now = time.Now()
	s.handle(ctx, msg(1, "a"), 0)
	s.flush(ctx, true) // checkpointed and acked
	if len(acked) != 1 || acked[0] != 1 {
		t.Fatalf("acked %v, want [1]", acked)
	}

	dead, cancel := context.WithCancel(ctx)
	cancel()
	s.store = failStore{mem}
	s.handle(dead, msg(2, "b"), 0) // cannot load b: not applied
	s.store = mem
	s.handle(ctx, msg(3, "a"), 0) // a is hot: applied
	s.flush(ctx, true)
	if len(acked) != 1 {
		t.Errorf("acked %v after an unapplied message, want only [1]", acked)
	}
	if _, hot := s.threads[threadKey{"acme", "b"}]; hot {
		t.Error("thread b was created without its checkpoint")
	}
}

// headFailStore is a memStore whose Put of one key fails (the store answers
// with an error and keeps the old value) while failKey is set; it records
// purges.
type headFailStore struct {
	memStore
	failKey string
	purged  []string
}

type errFuture struct{ err error }

func (f errFuture) Wait(context.Context) error { return f.err }
func (f errFuture) Result() (bool, error)      { return true, f.err }

func (m *headFailStore) Put(ctx context.Context, key string, v []byte, meta nats.Header) (PutFuture, error) {
	if key == m.failKey {
		return errFuture{errors.New("no quorum")}, nil
	}
	return m.memStore.Put(ctx, key, v, meta)
}

func (m *headFailStore) Purge(key string) error {
	m.purged = append(m.purged, key)
	return m.memStore.Purge(key)
}

// TestChunkPurgeWaitsForHead: a chunked checkpoint's previous chunks are
// purged only after the store confirmed the head that supersedes them. When
// the new head's write fails, the stored head still points at the old
// chunks, which must still be there: the checkpoint stays readable (it was
// purged at issue time before, and the thread would have restarted empty).
func TestChunkPurgeWaitsForHead(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMsgSize = 2048 // chunks of 1 KiB
	store := &headFailStore{memStore: memStore{}}
	s := unitShard(cfg, 0, store)
	var acked []uint64
	big := func(seq uint64, body string) *testMsg {
		return &testMsg{subject: wire.StoredSubject(0, "acme", "big"), seq: seq, acked: &acked, data: []byte(body)}
	}
	delta := func(c byte) string {
		return `{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","role":"assistant","delta":"` + strings.Repeat(string(c), 1500) + `"}`
	}
	ctx := context.Background()
	key := wire.CheckpointKey("acme", "big")
	s.now = time.Now()
	s.handle(ctx, big(1, `{"type":"RUN_STARTED","threadId":"big","runId":"r"}`+"\n"+delta('a')), 0)
	s.flush(ctx, true)
	gen1, n1, chunked, err := parseChunkHead(store.memStore[key])
	if err != nil || !chunked || gen1 != 1 || n1 < 2 {
		t.Fatalf("first checkpoint: gen %d, %d chunks, chunked %v, %v", gen1, n1, chunked, err)
	}

	store.failKey = key
	s.handle(ctx, big(2, delta('b')), 0)
	s.flush(ctx, true)
	if len(store.purged) != 0 {
		t.Errorf("purged %v although the superseding head was not stored", store.purged)
	}
	fresh := &hotThread{key: threadKey{"acme", "big"}, id: "big"}
	if err := s.load(ctx, fresh); err != nil || fresh.ckptSeq != 1 || fresh.th.Seq() != 1 {
		t.Fatalf("after a failed head write: checkpoint seq %d (want 1), err %v", fresh.ckptSeq, err)
	}
	if slices.Contains(acked, 2) {
		t.Errorf("acked %v: seq 2 has no stored checkpoint", acked)
	}

	store.failKey = ""
	s.flush(ctx, true) // the thread is still dirty: the write is retried
	for i := range n1 {
		if _, ok := store.memStore[chunkKey(key, gen1, i)]; ok {
			t.Errorf("chunk %d of the superseded generation not purged", i)
		}
	}
	fresh = &hotThread{key: threadKey{"acme", "big"}, id: "big"}
	if err := s.load(ctx, fresh); err != nil || fresh.ckptSeq != 2 {
		t.Fatalf("after the retry: checkpoint seq %d (want 2), err %v", fresh.ckptSeq, err)
	}
	if !slices.Contains(acked, 2) {
		t.Errorf("acked %v: seq 2 is covered now", acked)
	}
}

// floorFailStore refuses writes of partition floors only.
type floorFailStore struct{ memStore }

func (m floorFailStore) Put(ctx context.Context, key string, v []byte, h nats.Header) (PutFuture, error) {
	if strings.HasPrefix(key, "_f.") {
		return nil, errors.New("store down")
	}
	return m.memStore.Put(ctx, key, v, h)
}

// TestFloorFollowsAcks: a shard stores its partition's floor after acking
// it (at most every floorInterval unless forced, and then even at a pass
// that acks nothing new), never beyond what it acked; a floor write that
// fails loses nothing but the floor (the acks stand, the stored floor stays
// older, which is safe) and is retried at the next ack pass; loadFloor
// reports a failing store as an error.
func TestFloorFollowsAcks(t *testing.T) {
	mem := memStore{}
	s := unitShard(testConfig(), 3, floorFailStore{mem})
	ps := s.parts[3]
	var acked []uint64
	msg := func(seq uint64, thread string) *testMsg {
		return &testMsg{subject: wire.StoredSubject(3, "acme", thread), seq: seq, acked: &acked,
			data: []byte(`{"type":"RUN_STARTED","threadId":"x","runId":"r"}`)}
	}
	ctx := context.Background()
	s.now = time.Now()
	s.handle(ctx, msg(10, "a"), 0)
	s.flush(ctx, true)
	if len(acked) != 1 || acked[0] != 10 {
		t.Fatalf("acked %v, want [10]", acked)
	}
	if _, ok := mem[floorKey(3)]; ok || ps.floor != 0 {
		t.Fatalf("a failed floor write was recorded: stored %q, ps.floor %d", mem[floorKey(3)], ps.floor)
	}

	s.store = mem
	s.handle(ctx, msg(11, "b"), 0)
	s.flush(ctx, true)
	if got, err := loadFloor(ctx, mem, 3); err != nil || got != 11 {
		t.Fatalf("stored floor %d, %v; want 11 (the last ack)", got, err)
	}
	// Unforced batches: a thread's checkpoint is written once it has been
	// dirty for CheckpointInterval and counts at the batch after that.
	settle := func() {
		s.now = s.now.Add(s.cfg.CheckpointInterval + ackInterval)
		s.flush(ctx, false)
		s.now = s.now.Add(2 * ackInterval)
		s.flush(ctx, false)
	}
	s.handle(ctx, msg(12, "a"), 0)
	settle() // acked within floorInterval of the last floor
	if acked[len(acked)-1] != 12 {
		t.Fatalf("acked %v, want 12 last", acked)
	}
	if got, _ := loadFloor(ctx, mem, 3); got != 11 {
		t.Errorf("floor rewritten within floorInterval: %d", got)
	}
	s.now = s.now.Add(floorInterval)
	s.flush(ctx, false) // nothing new to ack
	if got, _ := loadFloor(ctx, mem, 3); got != 12 {
		t.Errorf("floor %d after floorInterval with nothing new acked, want the last ack 12", got)
	}
	s.now = s.now.Add(floorInterval)
	s.handle(ctx, msg(13, "b"), 0)
	settle()
	if acked[len(acked)-1] != 13 {
		t.Fatalf("acked %v, want 13 last", acked)
	}
	if got, _ := loadFloor(ctx, mem, 3); got != 13 {
		t.Errorf("floor %d after floorInterval, want the last ack 13", got)
	}

	if _, err := loadFloor(ctx, failStore{mem}, 3); err == nil {
		t.Error("loadFloor on a failing store: no error")
	}
}

// lateFloorStore answers floor writes through a future that has not
// reported yet: Result says not done, and Wait reports err once called.
type lateFloorStore struct {
	memStore
	err    error
	waited int
}

type lateFuture struct {
	s *lateFloorStore
}

func (f lateFuture) Result() (bool, error)      { return false, nil }
func (f lateFuture) Wait(context.Context) error { f.s.waited++; return f.s.err }

func (m *lateFloorStore) Put(ctx context.Context, key string, v []byte, h nats.Header) (PutFuture, error) {
	if strings.HasPrefix(key, "_f.") {
		return lateFuture{m}, nil
	}
	return m.memStore.Put(ctx, key, v, h)
}

// TestFinalFloorAwaited: at shutdown (a forced flush) the floor write is
// waited for, so a stop that returned has stored its final floor (CI once
// saw the next ingest read a floor written after the stop returned); a
// write the store then refuses is not recorded as the partition's floor.
// Unforced, the write is not waited for.
func TestFinalFloorAwaited(t *testing.T) {
	store := &lateFloorStore{memStore: memStore{}, err: errors.New("no quorum")}
	s := unitShard(testConfig(), 3, store)
	ps := s.parts[3]
	var acked []uint64
	msg := func(seq uint64) *testMsg {
		return &testMsg{subject: wire.StoredSubject(3, "acme", "a"), seq: seq, acked: &acked,
			data: []byte(`{"type":"RUN_STARTED","threadId":"x","runId":"r"}`)}
	}
	ctx := context.Background()
	s.now = time.Now()
	s.handle(ctx, msg(10), 0)
	s.flush(ctx, true)
	if store.waited != 1 {
		t.Fatalf("forced floor write waited for %d times, want 1", store.waited)
	}
	if ps.floor != 0 {
		t.Errorf("a refused final floor was recorded: ps.floor %d", ps.floor)
	}

	store.err = nil
	s.handle(ctx, msg(11), 0)
	s.flush(ctx, true)
	if store.waited != 2 || ps.floor != 11 {
		t.Errorf("after an accepted final write: waited %d (want 2), floor %d (want 11)", store.waited, ps.floor)
	}

	s.now = s.now.Add(floorInterval)
	s.handle(ctx, msg(12), 0)
	s.now = s.now.Add(s.cfg.CheckpointInterval + ackInterval)
	s.flush(ctx, false)
	s.now = s.now.Add(2 * ackInterval)
	s.flush(ctx, false)
	if acked[len(acked)-1] != 12 {
		t.Fatalf("acked %v, want 12 last", acked)
	}
	if store.waited != 2 || ps.floor != 12 {
		t.Errorf("unforced floor write: waited %d (want 2: not waited for), floor %d (want 12)", store.waited, ps.floor)
	}
}

// ctxStore is a memStore whose Put waits for its context to end, like a
// fenced store reading a revision back from a leader that does not answer.
type ctxStore struct{ memStore }

func (ctxStore) Put(ctx context.Context, _ string, _ []byte, _ nats.Header) (PutFuture, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestCheckpointPutEndsWithHardContext: a checkpoint write that waits on
// the store (a read-back nobody answers) ends when the shard's hard
// context does — the drain's bound — and leaves its thread dirty, its
// message un-acked.
func TestCheckpointPutEndsWithHardContext(t *testing.T) {
	s := unitShard(testConfig(), 0, ctxStore{memStore{}})
	var acked []uint64
	hard, cancel := context.WithCancel(context.Background())
	s.now = time.Now()
	s.handle(hard, &testMsg{subject: wire.StoredSubject(0, "acme", "a"), seq: 1, acked: &acked,
		data: []byte(`{"type":"RUN_STARTED","threadId":"a","runId":"r"}`)}, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.flush(hard, true)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("flush still waits on the store after the hard context ended")
	}
	if len(acked) != 0 {
		t.Errorf("acked %v without a stored checkpoint", acked)
	}
	if n := len(s.parts[0].dirty); n != 1 {
		t.Errorf("%d dirty threads, want 1", n)
	}
}

// A run's end is not a reason to checkpoint its thread before the
// interval: many runs ending together would double the store's writes.
// The thread is written once the interval has passed, as any dirty one.
func TestRunEndWaitsForTheInterval(t *testing.T) {
	mem := memStore{}
	ctx := context.Background()
	cfg := testConfig()
	cfg.CheckpointInterval = time.Minute
	s := unitShard(cfg, 0, mem)
	var acked []uint64
	s.now = time.Now()
	for i, ev := range []string{`{"type":"RUN_STARTED","threadId":"r","runId":"r1"}`, `{"type":"RUN_FINISHED","threadId":"r","runId":"r1"}`} {
		s.handle(ctx, &testMsg{subject: wire.StoredSubject(0, "acme", "r"), seq: uint64(i + 1), acked: &acked, data: []byte(ev)}, 0)
	}
	s.flush(ctx, false)
	if len(mem) != 0 {
		t.Fatalf("checkpointed at the run's end: %d keys written", len(mem))
	}
	s.now = s.now.Add(time.Minute)
	s.flush(ctx, false)
	s.flush(ctx, false) // the write confirmed
	if len(mem) == 0 {
		t.Fatal("not checkpointed once the interval passed")
	}
}

// TestChunkPurgeStrayGeneration: the chunks written for a head whose write
// failed are purged once a head of a later generation is confirmed, with
// the previous generation's: nothing reads them any more, and kept they
// would fill the bucket a failed write at a time.
func TestChunkPurgeStrayGeneration(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMsgSize = 2048 // chunks of 1 KiB
	store := &headFailStore{memStore: memStore{}}
	s := unitShard(cfg, 0, store)
	var acked []uint64
	big := func(seq uint64, body string) *testMsg {
		return &testMsg{subject: wire.StoredSubject(0, "acme", "big"), seq: seq, acked: &acked, data: []byte(body)}
	}
	delta := func(c byte) string {
		return `{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","role":"assistant","delta":"` + strings.Repeat(string(c), 1500) + `"}`
	}
	ctx := context.Background()
	key := wire.CheckpointKey("acme", "big")
	s.now = time.Now()
	s.handle(ctx, big(1, `{"type":"RUN_STARTED","threadId":"big","runId":"r"}`+"\n"+delta('a')), 0)
	s.flush(ctx, true)
	store.failKey = key
	s.handle(ctx, big(2, delta('b')), 0)
	s.flush(ctx, true) // generation 2's chunks are written, its head is not
	store.failKey = ""
	s.handle(ctx, big(3, delta('c')), 0)
	s.flush(ctx, true) // generation 3's head is confirmed
	gen, n, chunked, err := parseChunkHead(store.memStore[key])
	if err != nil || !chunked || gen != 3 {
		t.Fatalf("stored head: gen %d, %d chunks, chunked %v, %v; want generation 3", gen, n, chunked, err)
	}
	for k := range store.memStore {
		if strings.HasPrefix(k, "_c.") && !strings.HasPrefix(k, chunkKey(key, 3, 0)[:len(chunkKey(key, 3, 0))-1]) {
			t.Errorf("chunk %s of a superseded generation is still stored", k)
		}
	}
	fresh := &hotThread{key: threadKey{"acme", "big"}, id: "big"}
	if err := s.load(ctx, fresh); err != nil || fresh.ckptSeq != 3 {
		t.Fatalf("checkpoint seq %d (want 3), err %v", fresh.ckptSeq, err)
	}
}
