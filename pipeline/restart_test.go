package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
		out[i] = stream{tenant: "acme", thread: fmt.Sprintf("%s-%d", prefix, i), events: base[i%len(base)]}
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
			subj, _ := EventSubject(s.tenant, s.thread)
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
	cfg.CheckpointInterval = time.Minute // only run ends, counts and shutdown checkpoint
	cfg.AckWait = time.Hour
	streams := genStreams(t, 100, "g")
	seqs := map[string][]uint64{}

	ti := startIngest(t, nc, cfg)
	mustInterleave(t, js, streams, 0, 15, 1, seqs)
	// Wait until the first ingest has seen everything published so far.
	waitFor(t, 30*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
	if err := ti.stop(); err != nil {
		t.Fatalf("first Run: %v", err)
	}
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
	head, err := kv.Get(t.Context(), CheckpointKey("acme", "big"))
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
			if strings.HasPrefix(k, "_c.") && !strings.HasPrefix(k, chunkKey(CheckpointKey("acme", "big"), gen, 0)[:len("_c.acme.big.")+len(fmt.Sprint(gen))]) {
				stale = append(stale, k)
			}
		}
		if len(stale) > 0 {
			return fmt.Errorf("stale chunks %v", stale)
		}
		return nil
	})
}
