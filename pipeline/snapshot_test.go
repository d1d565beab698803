package pipeline

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/wire"
)

// TestSnapQueue: requests for a queued thread join its entry (one reply for
// all); a new thread beyond the limit, or a waiter beyond the per-thread
// bound, is refused (tail drop); take returns the oldest threads first.
func TestSnapQueue(t *testing.T) {
	q := newSnapQueue(2)
	req := func(subj string) *nats.Msg { return &nats.Msg{Subject: subj} }
	for _, tt := range []struct {
		give string
		want bool
	}{
		{"a", true}, {"b", true}, {"a", true}, {"c", false}, {"b", true},
	} {
		if got := q.add(req(tt.give)); got != tt.want {
			t.Errorf("add(%s) = %v, want %v", tt.give, got, tt.want)
		}
	}
	groups := q.take(nil, 1)
	if len(groups) != 1 || groups[0].subject != "a" || len(groups[0].reqs) != 2 {
		t.Fatalf("take 1: %+v, want a with 2 requests", groups)
	}
	select {
	case <-q.sig:
	default:
		t.Fatal("no signal while b is still queued")
	}
	if !q.add(req("c")) { // a's slot is free again
		t.Error("c refused after a was taken")
	}
	groups = q.take(nil, 10)
	if len(groups) != 2 || groups[0].subject != "b" || len(groups[0].reqs) != 2 || groups[1].subject != "c" {
		t.Fatalf("take all: %+v, want b (2), c (1)", groups)
	}
	for i := range snapWaitersPerThread {
		if !q.add(req("d")) {
			t.Fatalf("waiter %d of d refused", i)
		}
	}
	if q.add(req("d")) {
		t.Error("waiter beyond snapWaitersPerThread accepted")
	}
}

// TestSnapshotCache: a hot thread's reply is encoded once per seq — the same
// bytes for every request at that seq, counted "cached" — and the next
// apply makes a fresh one.
func TestSnapshotCache(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg)
	streams := genStreams(t, 1, "cache")
	st := streams[0]
	tok := wire.EncodeThread(st.thread)
	subj := wire.SnapSubject(wire.Partition(st.tenant, tok, cfg.Partitions), st.tenant, tok)
	request := func() *nats.Msg {
		t.Helper()
		msg, err := nc.Request(subj, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wire.ParseSnapshot(msg); err != nil {
			t.Fatal(err)
		}
		return msg
	}
	seqs := map[string][]uint64{}
	mustInterleave(t, js, streams, 0, 5, 1, seqs)
	waitFor(t, 20*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
	cachedBefore := counter(t, cfg.Metrics.Snapshots.WithLabelValues("cached"))
	a, b := request(), request()
	if !bytes.Equal(a.Data, b.Data) || a.Header.Get(wire.HeaderSeq) != b.Header.Get(wire.HeaderSeq) {
		t.Fatalf("two replies at one seq differ:\n%s\n%s", a.Data, b.Data)
	}
	if got := counter(t, cfg.Metrics.Snapshots.WithLabelValues("cached")) - cachedBefore; got < 1 {
		t.Errorf("cached replies %v, want ≥ 1", got)
	}

	mustInterleave(t, js, streams, 5, 6, 1, seqs)
	ss := seqs[st.tenant+"/"+st.thread]
	want := strconv.FormatUint(ss[len(ss)-1], 10)
	waitFor(t, 20*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
	c := request()
	if c.Header.Get(wire.HeaderSeq) != want || bytes.Equal(c.Data, a.Data) {
		t.Fatalf("after an apply: seq %s (want %s), same bytes as before: %v", c.Header.Get(wire.HeaderSeq), want, bytes.Equal(c.Data, a.Data))
	}
	snap, err := wire.ParseSnapshot(c)
	if err != nil || strconv.FormatUint(snap.Seq, 10) != want {
		t.Fatalf("fresh reply: %+v, %v", snap, err)
	}
}

// BenchmarkSnapshotReply measures answering a join's snapshot request for a
// hot thread (one stream of the ingest benchmark's load) that has not changed since the last request:
// "cached" is the shard's path (the reply encoded once per seq, then
// shared); the baseline encodes the reply for every request, as the shard
// did before the cache. NATS is left out (the request is not bound to a
// connection, so the respond is a no-op): this is the shard goroutine's cost.
//
//	go test -run '^$' -bench SnapshotReply ./pipeline
func BenchmarkSnapshotReply(b *testing.B) {
	msgs, _ := benchLoad(benchThreads*200, 32)
	cfg := DefaultConfig()
	cfg.Tap = false
	s := newShard(0, &cfg, discardLogger(), NewMetrics(nil), &countPub{}, memStore{})
	tok := wire.EncodeThread("bench-snap")
	p := wire.Partition("acme", tok, cfg.Partitions)
	ps := &partState{p: p, dirty: make(map[*hotThread]struct{})}
	s.parts[p] = ps
	t := s.thread(context.Background(), ps, threadKey{"acme", tok})
	s.now = time.Now()
	for i, m := range msgs {
		if m.thread == 0 { // one thread's stream, in order
			s.apply(t, uint64(i+1), m.data, nil)
		}
	}
	s.flush(context.Background(), false)
	g := snapGroup{subject: wire.SnapSubject(p, "acme", tok), reqs: []*nats.Msg{{Reply: "_INBOX.x"}}}
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.snapshot(context.Background(), g)
		}
		b.ReportMetric(float64(len(t.snap)), "reply-bytes")
	})
	b.Run("baseline-encode-each", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.encodeSnapshot(t)
		}
	})
}
