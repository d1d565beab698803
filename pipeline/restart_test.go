package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/wire"
)

// genStreams reads testdata/threads.jsonl (streamgen: node gen.mjs threads
// --seed 11 --threads 100 --events 30) and deals its streams to n threads
// named <prefix>-<i>, reusing streams round robin.
func genStreams(t testing.TB, n int, prefix string) []stream {
	t.Helper()
	f, err := os.Open("testdata/threads.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var base [][]json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		base = append(base, l.Events)
	}
	if len(base) == 0 {
		t.Fatal("no streams in testdata/threads.jsonl")
	}
	out := make([]stream, n)
	for i := range out {
		thread := fmt.Sprintf("%s-%d", prefix, i)
		out[i] = stream{tenant: "acme", thread: thread, events: withThread(base[i%len(base)], thread)}
	}
	return out
}

// interleaved publishes the streams' events round robin across threads (so
// that a cut anywhere leaves many threads mid-stream) in messages of up to
// batch events, asynchronously, from event index lo up to hi (exclusive) of
// each stream. Seqs are appended to seqs. It may run on any goroutine.
func interleaved(js jetstream.JetStream, streams []stream, lo, hi, batch int, seqs map[string][]uint64) error {
	type pending struct {
		key string
		n   int
		f   jetstream.PubAckFuture
	}
	var futs []pending
	wait := func() error {
		for _, p := range futs {
			select {
			case ack := <-p.f.Ok():
				for range p.n {
					seqs[p.key] = append(seqs[p.key], ack.Sequence)
				}
			case err := <-p.f.Err():
				return fmt.Errorf("publish: %w", err)
			case <-time.After(30 * time.Second):
				return fmt.Errorf("publish ack timeout")
			}
		}
		futs = futs[:0]
		return nil
	}
	for i := lo; i < hi; i += batch {
		for _, s := range streams {
			if i >= len(s.events) {
				continue
			}
			n := min(batch, len(s.events)-i, hi-i)
			subj, _ := wire.EventSubject(s.tenant, s.thread)
			data := s.events[i]
			if n > 1 {
				data = joinLines(s.events[i : i+n])
			}
			f, err := js.PublishMsgAsync(&nats.Msg{Subject: subj, Data: data})
			if err != nil {
				return err
			}
			futs = append(futs, pending{s.tenant + "/" + s.thread, n, f})
			if len(futs) == 1000 { // stay under the client's async window
				if err := wait(); err != nil {
					return err
				}
			}
		}
	}
	return wait()
}

func mustInterleave(t testing.TB, js jetstream.JetStream, streams []stream, lo, hi, batch int, seqs map[string][]uint64) {
	t.Helper()
	if err := interleaved(js, streams, lo, hi, batch, seqs); err != nil {
		t.Fatal(err)
	}
}

func joinLines(evs []json.RawMessage) []byte {
	var b []byte
	for i, e := range evs {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, e...)
	}
	return b
}

// TestGracefulRestart stops ingest mid-stream, checks that everything it
// applied was checkpointed and acked, starts a new one, and checks every
// view against the offline reduction.
func TestGracefulRestart(t *testing.T) {
	checkNoGoroutineLeak(t)
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.CheckpointInterval = time.Minute // only counts and shutdown checkpoint
	cfg.AckWait = time.Hour
	streams := genStreams(t, 100, "g")
	seqs := map[string][]uint64{}

	firstHalf(t, nc, js, cfg, streams, seqs)
	// Graceful stop acked everything: every consumer's ack floor is the
	// stream's last seq of its partition (nothing pending).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	// Acks are processed asynchronously by the server: poll.
	waitFor(t, 10*time.Second, func() error {
		for _, p := range cfg.OwnedPartitions() {
			c, err := st.Consumer(ctx, cfg.ConsumerName(p))
			if err != nil {
				return err
			}
			if info := c.CachedInfo(); info.NumAckPending != 0 || info.NumPending != 0 {
				return fmt.Errorf("partition %d after graceful stop: ack pending %d, pending %d", p, info.NumAckPending, info.NumPending)
			}
		}
		return nil
	})

	mustInterleave(t, js, streams, 15, 1000, 4, seqs)
	startIngest(t, nc, cfg)
	checkViews(t, nc, cfg.Partitions, streams, seqs)
}

// firstHalf runs an ingest over the first 15 events of every stream, waits
// until it has applied them all, and stops it gracefully.
func firstHalf(t *testing.T, nc *nats.Conn, js jetstream.JetStream, cfg Config, streams []stream, seqs map[string][]uint64) {
	t.Helper()
	ti := startIngest(t, nc, cfg)
	mustInterleave(t, js, streams, 0, 15, 1, seqs)
	waitFor(t, 30*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
	if err := ti.stop(); err != nil {
		t.Fatalf("first Run: %v", err)
	}
}

// allApplied reports whether every stream's snapshot has reached its last
// published seq.
func allApplied(nc *nats.Conn, parts int, streams []stream, seqs map[string][]uint64) error {
	for _, s := range streams {
		ss := seqs[s.tenant+"/"+s.thread]
		if len(ss) == 0 {
			continue
		}
		snap, err := snapshot(nc, parts, s.tenant, s.thread)
		if err != nil {
			return err
		}
		if snap.Seq != ss[len(ss)-1] {
			return fmt.Errorf("%s at %d, want %d", s.thread, snap.Seq, ss[len(ss)-1])
		}
	}
	return nil
}

// TestChunkedCheckpoints: with a tiny max message size, a thread's
// checkpoint is larger than one message and is stored in chunks; threads are
// evicted and reloaded from them and after a restart, the views stay exact,
// and superseded chunks are purged.
func TestChunkedCheckpoints(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.MaxMsgSize = 2048 // chunks of 1 KiB
	cfg.MemoryBudget = 1  // evict every clean thread after each batch
	cfg.Metrics = NewMetrics(nil)
	var events []json.RawMessage
	events = append(events, json.RawMessage(`{"type":"RUN_STARTED","threadId":"big","runId":"r1"}`))
	for i := range 20 {
		events = append(events, json.RawMessage(fmt.Sprintf(`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m%d","role":"assistant","delta":"%s"}`, i%3, strings.Repeat(string(rune('a'+i)), 700))))
	}
	events = append(events, json.RawMessage(`{"type":"RUN_FINISHED","threadId":"big","runId":"r1"}`))
	streams := []stream{{tenant: "acme", thread: "big", events: events}}
	seqs := map[string][]uint64{}

	ti := startIngest(t, nc, cfg)
	mustInterleave(t, js, streams, 0, 11, 1, seqs)
	waitFor(t, 20*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
	if err := ti.stop(); err != nil {
		t.Fatal(err)
	}
	startIngest(t, nc, cfg)
	mustInterleave(t, js, streams, 11, 100, 1, seqs)
	checkViews(t, nc, cfg.Partitions, streams, seqs)
	if counter(t, cfg.Metrics.Loads) == 0 {
		t.Error("no checkpoint was loaded")
	}

	kv, err := js.KeyValue(t.Context(), cfg.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	head, err := kv.Get(t.Context(), wire.CheckpointKey("acme", "big"))
	if err != nil {
		t.Fatal(err)
	}
	gen, n, chunked, err := parseChunkHead(head.Value())
	if err != nil || !chunked || n < 2 {
		t.Fatalf("head %q: chunked %v, %d chunks, %v", head.Value(), chunked, n, err)
	}
	// Only the current generation's chunks remain (purges are async: poll).
	waitFor(t, 10*time.Second, func() error {
		lister, err := kv.ListKeys(t.Context())
		if err != nil {
			return err
		}
		var stale []string
		for k := range lister.Keys() {
			if strings.HasPrefix(k, "_c.") && !strings.HasPrefix(k, chunkKey(wire.CheckpointKey("acme", "big"), gen, 0)[:len("_c.acme.big.")+len(fmt.Sprint(gen))]) {
				stale = append(stale, k)
			}
		}
		if len(stale) > 0 {
			return fmt.Errorf("stale chunks %v", stale)
		}
		return nil
	})
}

// TestServerRestartLosesConsumers: with Config.ConsumerMemory a server
// restart forgets the partition consumers. The next ingest recreates each
// one after the ack floor its shard stored in the bucket (not at the
// stream's beginning), and every view still equals the offline reduction:
// nothing lost, nothing applied twice.
func TestServerRestartLosesConsumers(t *testing.T) {
	checkNoGoroutineLeak(t)
	dir := t.TempDir()
	s := runServerAt(t, dir)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	if !cfg.ConsumerMemory {
		t.Fatal("ConsumerMemory is not the default")
	}
	streams := genStreams(t, 100, "m")
	seqs := map[string][]uint64{}

	firstHalf(t, nc, js, cfg, streams, seqs)
	// The graceful stop stored every partition's final floor.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	floors := map[int]uint64{}
	for _, p := range cfg.OwnedPartitions() {
		e, err := kv.Get(ctx, floorKey(p))
		if err != nil {
			t.Fatalf("partition %d: no stored floor: %v", p, err)
		}
		f, err := strconv.ParseUint(string(e.Value()), 10, 64)
		if err != nil || f == 0 {
			t.Fatalf("partition %d: floor %q", p, e.Value())
		}
		floors[p] = f
	}

	nc.Close()
	s.Shutdown()
	s.WaitForShutdown()
	s = runServerAt(t, dir)
	nc = connect(t, s)
	js, _ = jetstream.New(nc)
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for n := range st.ConsumerNames(ctx).Name() {
		t.Fatalf("consumer %s survived the restart: the test does not test what it says", n)
	}

	mustInterleave(t, js, streams, 15, 1000, 4, seqs)
	startIngest(t, nc, cfg)
	for _, p := range cfg.OwnedPartitions() {
		c, err := st.Consumer(ctx, cfg.ConsumerName(p))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.CachedInfo().Config.OptStartSeq; got != floors[p]+1 {
			t.Errorf("partition %d: consumer starts at %d, want the stored floor %d + 1", p, got, floors[p])
		}
	}
	checkViews(t, nc, cfg.Partitions, streams, seqs)
}

// TestGracefulStopStoresFinalFloor: a graceful stop stores each partition's
// final floor, the last seq it acked (floor.go, storeFloor), even when it has
// nothing left to ack at the stop and its last ack came within floorInterval
// of the previous floor write, which therefore did not store it: the next
// start replays only what came after that ack.
func TestGracefulStopStoresFinalFloor(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	ti := startIngest(t, nc, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subj, _ := wire.EventSubject("acme", "fl")
	p := wire.Partition("acme", wire.EncodeThread("fl"), cfg.Partitions)
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	ackedTo := func(seq uint64) {
		waitFor(t, 10*time.Second, func() error {
			c, err := st.Consumer(ctx, cfg.ConsumerName(p))
			if err != nil {
				return err
			}
			if f := c.CachedInfo().AckFloor.Stream; f < seq {
				return fmt.Errorf("ack floor %d, want %d", f, seq)
			}
			return nil
		})
	}
	a1, err := js.Publish(ctx, subj, []byte(`{"type":"RUN_STARTED","threadId":"fl","runId":"r1"}`))
	if err != nil {
		t.Fatal(err)
	}
	ackedTo(a1.Sequence)
	a2, err := js.Publish(ctx, subj, []byte(`{"type":"RUN_FINISHED","threadId":"fl","runId":"r1"}`))
	if err != nil {
		t.Fatal(err)
	}
	ackedTo(a2.Sequence)
	if err := ti.stop(); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, floorKey(p))
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := strconv.ParseUint(string(e.Value()), 10, 64); f != a2.Sequence {
		t.Errorf("stored floor after a graceful stop %d, want the acked %d", f, a2.Sequence)
	}
}

// TestStoredFloorUntrusted: a floor record that is not a number, or that
// lies past the stream's end (left by an earlier stream of the same name),
// is not started after: the consumer starts at the stream's beginning,
// which is never wrong.
func TestStoredFloorUntrusted(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, kv, err := EnsureStreams(ctx, js, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	store, err := newKVStore(nc, kv, cfg.Bucket, "", cfg.CheckpointAckTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, floorKey(0), []byte("not a seq")); err != nil {
		t.Fatal(err)
	}
	if f, err := loadFloor(ctx, store, 0); err != nil || f != 0 {
		t.Errorf("garbage floor: loadFloor = %d, %v; want 0, nil", f, err)
	}
	if f, err := loadFloor(ctx, store, 1); err != nil || f != 0 {
		t.Errorf("absent floor: loadFloor = %d, %v; want 0, nil", f, err)
	}
	if _, err := kv.Put(ctx, floorKey(1), []byte("1000000")); err != nil {
		t.Fatal(err)
	}
	f, err := loadFloor(ctx, store, 1)
	if err != nil || f != 1000000 {
		t.Fatalf("loadFloor = %d, %v; want 1000000", f, err)
	}
	if _, err := st.Info(ctx); err != nil { // refresh CachedInfo: the stream is empty
		t.Fatal(err)
	}
	cons, err := bindConsumer(ctx, st, &cfg, 1, f)
	if err != nil {
		t.Fatal(err)
	}
	if c := cons.CachedInfo().Config; c.DeliverPolicy != jetstream.DeliverAllPolicy || c.OptStartSeq != 0 {
		t.Errorf("floor past the stream's end was used: deliver %v from %d", c.DeliverPolicy, c.OptStartSeq)
	}
}

// TestServerRestartWhileRunning: the server restarts under a running
// Restarting ingest (static assignment, RestartOnLost). The restart forgets
// the memory-stored consumers; each partition's Consume reports it, the
// ingest stops with ErrConsumerLost and a fresh one rebinds after the stored
// floors, and every view still equals the offline reduction.
func TestServerRestartWhileRunning(t *testing.T) {
	dir := t.TempDir()
	scfg := natsembed.DefaultConfig()
	scfg.StoreDir = dir
	s, err := natsembed.Start(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	streams := genStreams(t, 100, "w")
	seqs := map[string][]uint64{}

	r := NewRestarting(func() (Service, error) { return NewIngest(nc, cfg) })
	r.RestartOnLost = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, 20*time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, 20*time.Second, func() error {
		if !r.Ready() {
			return errors.New("not ready")
		}
		return nil
	})
	mustInterleave(t, js, streams, 0, 15, 1, seqs)
	waitFor(t, 30*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })

	// Restart the server on the same port and store; the client reconnects.
	scfg.Port = s.Addr().(*net.TCPAddr).Port
	s.Shutdown()
	s.WaitForShutdown()
	s, err = natsembed.Start(scfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() error {
		if r.Restarts() == 0 {
			return errors.New("the ingest did not restart after its consumers were lost")
		}
		if !r.Ready() {
			return errors.New("not ready after the restart")
		}
		return nil
	})
	mustInterleave(t, js, streams, 15, 1000, 4, seqs)
	checkViews(t, nc, cfg.Partitions, streams, seqs)
}
