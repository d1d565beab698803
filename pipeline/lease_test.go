package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/threadcast/threadcast/internal/testsupport/natstest"
)

func TestLeaseConfigValidate(t *testing.T) {
	ok := DefaultLeaseConfig()
	ok.Holder = "ingest-0"
	tests := []struct {
		name    string
		give    func(c *LeaseConfig)
		wantErr string
	}{
		{name: "ok", give: func(*LeaseConfig) {}},
		{name: "no bucket", give: func(c *LeaseConfig) { c.Bucket = "" }, wantErr: "bucket"},
		{name: "short ttl", give: func(c *LeaseConfig) { c.TTL = 500 * time.Millisecond }, wantErr: "ttl"},
		{name: "no holder", give: func(c *LeaseConfig) { c.Holder = "" }, wantErr: "holder"},
		{name: "holder with a dot", give: func(c *LeaseConfig) { c.Holder = "a.b" }, wantErr: "holder"},
		{name: "partitions", give: func(c *LeaseConfig) { c.Partitions = 0 }, wantErr: "partitions"},
		{name: "replicas", give: func(c *LeaseConfig) { c.Replicas = 7 }, wantErr: "replicas"},
	}
	for _, tt := range tests {
		c := ok
		tt.give(&c)
		err := c.Validate()
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err %v, want ErrConfig mentioning %q", tt.name, err, tt.wantErr)
		}
	}
}

// newTestFencedStore opens a fenced checkpoint store on bucket over nc.
func newTestFencedStore(t *testing.T, nc *nats.Conn, bucket string, onFence func(error)) *fencedStore {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Bucket = bucket
	kv, err := js.CreateOrUpdateKeyValue(t.Context(), kvConfig(&cfg))
	if err != nil {
		t.Fatal(err)
	}
	base, err := newKVStore(nc, kv, bucket, "", DefaultConfig().CheckpointAckTimeout)
	if err != nil {
		t.Fatal(err)
	}
	st, err := newFencedStore(t.Context(), js, base, bucket, onFence)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func putWait(t *testing.T, s CheckpointStore, key, val string) error {
	t.Helper()
	f, err := s.Put(t.Context(), key, []byte(val), nil)
	if err != nil {
		return err
	}
	return f.Wait(t.Context())
}

// TestFencedStaleOwnerWrite: an instance that read a checkpoint and then lost
// the partition cannot overwrite what the new owner wrote since — the server
// refuses the write (expected last subject sequence), the store reports
// ErrFenced and calls onFence; the new owner's value stays.
func TestFencedStaleOwnerWrite(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	var fencedA, fencedB []error
	a := newTestFencedStore(t, nc, "FENCE", func(err error) { fencedA = append(fencedA, err) })
	b := newTestFencedStore(t, nc, "FENCE", func(err error) { fencedB = append(fencedB, err) })
	ctx := t.Context()

	// A is the owner: it creates and updates the key.
	if _, err := a.Get(ctx, "acme.t1"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("get of a new key: %v", err)
	}
	for _, v := range []string{"a1", "a2"} {
		if err := putWait(t, a, "acme.t1", v); err != nil {
			t.Fatalf("owner put %s: %v", v, err)
		}
	}
	// B takes over: reads A's checkpoint, writes its own.
	if v, err := b.Get(ctx, "acme.t1"); err != nil || string(v) != "a2" {
		t.Fatalf("new owner reads %q, %v", v, err)
	}
	if err := putWait(t, b, "acme.t1", "b1"); err != nil {
		t.Fatalf("new owner put: %v", err)
	}
	// A, stale, writes: refused.
	err := putWait(t, a, "acme.t1", "a3-stale")
	if !errors.Is(err, ErrFenced) || !isWrongLastSeq(errors.Unwrap(err)) && !strings.Contains(err.Error(), "wrong last sequence") {
		t.Fatalf("stale put: err %v, want ErrFenced", err)
	}
	if len(fencedA) != 1 || len(fencedB) != 0 {
		t.Fatalf("onFence calls: stale %v, owner %v", fencedA, fencedB)
	}
	// Still refused after reading nothing new (no silent re-read of the
	// revision after a fence).
	if err := putWait(t, a, "acme.t1", "a4-stale"); !errors.Is(err, ErrFenced) {
		t.Fatalf("second stale put: %v", err)
	}
	if v, err := b.Get(ctx, "acme.t1"); err != nil || string(v) != "b1" {
		t.Fatalf("after the stale writes the key holds %q, %v; want the owner's b1", v, err)
	}
	// The owner keeps writing.
	if err := putWait(t, b, "acme.t1", "b2"); err != nil {
		t.Fatalf("owner put after fence: %v", err)
	}

	// Both believe a key absent; the first to create it wins. (Fresh
	// stores: a fenced store refuses every further write.)
	a = newTestFencedStore(t, nc, "FENCE", nil)
	if _, err := a.Get(ctx, "acme.t2"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "acme.t2"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatal(err)
	}
	if err := putWait(t, b, "acme.t2", "b"); err != nil {
		t.Fatal(err)
	}
	if err := putWait(t, a, "acme.t2", "a"); !errors.Is(err, ErrFenced) {
		t.Fatalf("racing create: %v, want ErrFenced", err)
	}

	// A key deleted by hand: its marker's revision is read, so the owner
	// can write it again.
	js, _ := jetstream.New(nc)
	kv, _ := js.KeyValue(ctx, "FENCE")
	if err := kv.Delete(ctx, "acme.t3"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "acme.t3"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("get of a deleted key: %v", err)
	}
	if err := putWait(t, b, "acme.t3", "b"); err != nil {
		t.Fatalf("put after a delete marker: %v", err)
	}
	// A write without a prior read reads the revision back first.
	c := newTestFencedStore(t, nc, "FENCE", nil)
	if err := putWait(t, c, "acme.t3", "c"); err != nil {
		t.Fatalf("unread put: %v", err)
	}
	// Chunk keys are not fenced.
	if err := putWait(t, a, "_c.acme.t1.5.0", "x"); err != nil {
		t.Fatal(err)
	}
	if err := putWait(t, b, "_c.acme.t1.5.0", "x"); err != nil {
		t.Fatal(err)
	}
}

// exclusive records which holder runs which partition and fails when two run
// one partition at once.
type exclusive struct {
	mu      sync.Mutex
	running map[int]string
	started map[string]int // holder → partitions started
	errs    []error
}

func newExclusive() *exclusive {
	return &exclusive{running: map[int]string{}, started: map[string]int{}}
}

func (x *exclusive) runner(holder string) PartitionFunc {
	return func(ctx context.Context, p int, _ uint64) error {
		x.mu.Lock()
		if other, busy := x.running[p]; busy {
			x.errs = append(x.errs, fmt.Errorf("partition %d started by %s while %s runs it", p, holder, other))
		}
		x.running[p] = holder
		x.started[holder]++
		x.mu.Unlock()
		<-ctx.Done()
		x.mu.Lock()
		if x.running[p] == holder {
			delete(x.running, p)
		}
		x.mu.Unlock()
		return nil
	}
}

func (x *exclusive) count(holder string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, h := range x.running {
		if h == holder {
			n++
		}
	}
	return n
}

func (x *exclusive) check(t *testing.T) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, err := range x.errs {
		t.Error(err)
	}
}

type runningLeases struct {
	l      *Leases
	m      *LeaseMetrics
	cancel context.CancelFunc
	done   chan error
}

func startLeases(t *testing.T, nc *nats.Conn, holder string, ttl time.Duration, parts int, run PartitionFunc) *runningLeases {
	t.Helper()
	lc := DefaultLeaseConfig()
	lc.Holder, lc.TTL, lc.Partitions, lc.Logger = holder, ttl, parts, discardLogger()
	lc.Metrics = NewLeaseMetrics(nil)
	l, err := NewLeases(nc, lc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningLeases{l: l, m: lc.Metrics, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- l.Run(ctx, run) }()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *runningLeases) stop() error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.cancel = nil
	return <-r.done
}

// TestLeasesBalanceHandover: one instance takes every partition; a second
// one joining gets half (graceful handover, no overlap); when it stops
// gracefully its leases are released and taken back at once, not after TTL.
func TestLeasesBalanceHandover(t *testing.T) {
	checkNoGoroutineLeak(t)
	s := runServer(t)
	const parts, ttl = 8, 3 * time.Second
	x := newExclusive()
	startLeases(t, connect(t, s), "a", ttl, parts, x.runner("a"))
	waitFor(t, 10*time.Second, func() error {
		if n := x.count("a"); n != parts {
			return fmt.Errorf("a runs %d", n)
		}
		return nil
	})
	b := startLeases(t, connect(t, s), "b", ttl, parts, x.runner("b"))
	waitFor(t, 10*time.Second, func() error {
		if na, nb := x.count("a"), x.count("b"); na != parts/2 || nb != parts/2 {
			return fmt.Errorf("a runs %d, b %d", na, nb)
		}
		return nil
	})
	if got := b.l.Held(); len(got) != parts/2 || !slices.IsSorted(got) {
		t.Errorf("b.Held() = %v", got)
	}
	start := time.Now()
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		if n := x.count("a"); n != parts {
			return fmt.Errorf("a runs %d", n)
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("graceful handover of %d partitions: %v (lease TTL %v)", parts/2, took, ttl)
	// Released leases are claimed on the next pass (TTL/5), not after TTL.
	if took > ttl {
		t.Errorf("handover took %v, longer than the TTL %v: leases were not released", took, ttl)
	}
	x.check(t)
}

// TestLeasesTakeoverAfterCrash: an instance whose connection dies (it can no
// longer renew or release: a crash, from the cluster's side) stops its
// partitions before the survivor starts them, and the survivor has them all
// within TTL plus one renewal period plus margin.
func TestLeasesTakeoverAfterCrash(t *testing.T) {
	s := runServer(t)
	const parts, ttl = 8, 2 * time.Second
	x := newExclusive()
	a := startLeases(t, connect(t, s), "a", ttl, parts, x.runner("a"))
	ncB := connect(t, s)
	b := startLeases(t, ncB, "b", ttl, parts, x.runner("b"))
	waitFor(t, 10*time.Second, func() error {
		if na, nb := x.count("a"), x.count("b"); na != parts/2 || nb != parts/2 {
			return fmt.Errorf("a runs %d, b %d", na, nb)
		}
		return nil
	})
	// b may have handed over leases before the crash while the two
	// balanced (it can start with more than its share): only releases
	// after the crash would be wrong.
	releasedBefore := metricValue(b.m.Events.WithLabelValues(LeaseReleased))
	crash := time.Now()
	ncB.Close()
	waitFor(t, ttl+5*time.Second, func() error {
		if n := x.count("a"); n != parts {
			return fmt.Errorf("a runs %d", n)
		}
		return nil
	})
	took := time.Since(crash)
	t.Logf("takeover after a crash: %v (lease TTL %v)", took, ttl)
	if limit := ttl + ttl/5 + time.Second; took > limit {
		t.Errorf("takeover took %v, want under %v", took, limit)
	}
	if took < ttl/2 {
		t.Errorf("takeover after %v: before the crashed holder's lease could have expired", took)
	}
	x.check(t)
	waitFor(t, 5*time.Second, func() error {
		if got := metricValue(b.m.Events.WithLabelValues(LeaseLost)); got != parts/2 {
			return fmt.Errorf("crashed holder counted %v leases lost, want %d", got, parts/2)
		}
		return nil
	})
	if got := metricValue(a.m.Held); got != parts {
		t.Errorf("survivor's leases_held = %v, want %d", got, parts)
	}
	if got := metricValue(b.m.Events.WithLabelValues(LeaseReleased)) - releasedBefore; got != 0 {
		t.Errorf("crashed holder counted %v releases after the crash", got)
	}
}

// TestLeasesNoDoubleOwnershipUnderChurn: four instances start and stop (some
// gracefully, some by losing their connection) in a race for eight
// partitions; no partition is ever run by two at once, and at the end the
// survivors hold every partition.
func TestLeasesNoDoubleOwnershipUnderChurn(t *testing.T) {
	s := runServer(t)
	const parts, ttl = 8, time.Second
	x := newExclusive()
	live := map[string]*runningLeases{}
	conns := map[string]*nats.Conn{}
	for i := range 4 {
		h := fmt.Sprintf("i%d", i)
		conns[h] = connect(t, s)
		live[h] = startLeases(t, conns[h], h, ttl, parts, x.runner(h))
	}
	for round := range 6 {
		time.Sleep(700 * time.Millisecond)
		h := fmt.Sprintf("i%d", round%4)
		if round%2 == 0 {
			_ = live[h].stop()
		} else {
			conns[h].Close() // crash: its leases expire
		}
		time.Sleep(300 * time.Millisecond)
		_ = live[h].stop()
		conns[h] = connect(t, s)
		live[h] = startLeases(t, conns[h], h, ttl, parts, x.runner(h))
	}
	waitFor(t, 10*time.Second, func() error {
		total := 0
		for h := range live {
			n := x.count(h)
			if n > (parts+len(live)-1)/len(live) {
				return fmt.Errorf("%s runs %d, above its fair share", h, n)
			}
			total += n
		}
		if total != parts {
			return fmt.Errorf("%d of %d partitions run", total, parts)
		}
		return nil
	})
	x.check(t)
}

// metricValue reads a gauge's or counter's current value.
func metricValue(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var d dto.Metric
	if err := (<-ch).Write(&d); err != nil {
		return -1
	}
	if d.Gauge != nil {
		return d.Gauge.GetValue()
	}
	return d.Counter.GetValue()
}

// TestFencedUnknownOutcome: a write whose answer never came (here: the
// store gives up on answers at once, as after a route cut between its
// server and the bucket's leader) may have been stored. The next write of
// the key must not take the key's revision as it finds it: a new owner may
// have written since, and overwriting its checkpoint with the stale owner's
// older one makes the next replay skip events the new owner acked (views
// that differ from the fold of their stored events). The store is fenced
// instead, and the new owner's checkpoint stays. With nobody else writing,
// the owner goes on whether its write was stored or not.
func TestFencedUnknownOutcome(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	ctx := t.Context()
	// answerless makes st give up on every put's answer at once; the put
	// is sent all the same.
	answerless := func(st *fencedStore) {
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(time.Nanosecond))
		if err != nil {
			t.Fatal(err)
		}
		st.js = js
	}
	// unanswered puts val (then val', val'', … while the answer still
	// beats the timeout, which a busy machine can let happen) until a put
	// goes unanswered, and returns the value of that one.
	unanswered := func(st *fencedStore, key, val string) string {
		t.Helper()
		for range 20 {
			err := putWait(t, st, key, val)
			if errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
				return val
			}
			if err != nil {
				t.Fatalf("put %s: %v, want no answer", val, err)
			}
			val += "'"
		}
		t.Fatalf("put %s: answered 20 times, want no answer", val)
		return ""
	}
	holds := func(st *fencedStore, key, want string) {
		t.Helper()
		waitFor(t, 5*time.Second, func() error {
			if _, v, err := st.last(ctx, key); err != nil || string(v) != want {
				return fmt.Errorf("%s holds %q (%v), want %q", key, v, err, want)
			}
			return nil
		})
	}

	var fencedA []error
	a := newTestFencedStore(t, nc, "UNSURE", func(err error) { fencedA = append(fencedA, err) })
	b := newTestFencedStore(t, nc, "UNSURE", nil)
	if _, err := a.Get(ctx, "acme.t1"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatal(err)
	}
	if err := putWait(t, a, "acme.t1", "a1"); err != nil {
		t.Fatal(err)
	}
	answerless(a)
	a2 := unanswered(a, "acme.t1", "a2")
	holds(b, "acme.t1", a2) // stored, although a never learned it
	// b takes over: reads a2, writes b1.
	if v, err := b.Get(ctx, "acme.t1"); err != nil || string(v) != a2 {
		t.Fatalf("new owner reads %q, %v; want %q", v, err, a2)
	}
	if err := putWait(t, b, "acme.t1", "b1"); err != nil {
		t.Fatal(err)
	}
	// a, answered again, writes again: fenced, b1 stays.
	a.js = b.js
	if err := putWait(t, a, "acme.t1", "a3-stale"); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale owner's write after an unanswered one: %v, want ErrFenced", err)
	}
	if len(fencedA) != 1 {
		t.Errorf("onFence called %d times, want 1", len(fencedA))
	}
	holds(b, "acme.t1", "b1")

	// Stored and unanswered, nobody else writing: the owner recognises
	// its own write and goes on.
	c := newTestFencedStore(t, nc, "UNSURE", nil)
	if _, err := c.Get(ctx, "acme.t2"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatal(err)
	}
	answerless(c)
	holds(c, "acme.t2", unanswered(c, "acme.t2", "c1"))
	c.js = b.js // answers again
	if err := putWait(t, c, "acme.t2", "c2"); err != nil {
		t.Fatalf("write after its own unanswered one: %v", err)
	}
	holds(c, "acme.t2", "c2")

	// Refused (not stored, not a fence): the owner goes on from the
	// revision it knew.
	d := newTestFencedStore(t, nc, "UNSURE", nil)
	if _, err := d.Get(ctx, "acme.t3"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatal(err)
	}
	if err := putWait(t, d, "acme.t3", "d1"); err != nil {
		t.Fatal(err)
	}
	f, err := d.Put(ctx, "acme.t3", []byte("d2"), nats.Header{jetstream.ExpectedStreamHeader: {"NOT_THE_BUCKET"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(ctx); err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("write to the wrong expected stream: %v, want a refusal", err)
	}
	if err := putWait(t, d, "acme.t3", "d3"); err != nil {
		t.Fatalf("write after a refused one: %v", err)
	}
	holds(d, "acme.t3", "d3")

	// The read-back is bounded by the caller's context.
	e := newTestFencedStore(t, nc, "UNSURE", nil)
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Put(done, "acme.t4", []byte("e1"), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("read-back with an ended context: %v", err)
	}
}

// TestLeasesStopWhenUnanswered: an instance whose requests go unanswered
// (cut off from the servers, still connected) stops each partition TTL/2
// after its last renewal, although its lease loop, waiting out one request
// after another (each bounded by TTL/5), gets round to checking it much
// later; the instance that takes the partitions over never runs one while
// the cut-off instance still does.
func TestLeasesStopWhenUnanswered(t *testing.T) {
	s := runServer(t)
	const parts, ttl = 8, 2 * time.Second
	x := newExclusive()
	px := newStallProxy(t, s.ClientURL())
	ncA := natstest.Connect(t, px.URL(), nats.MaxReconnects(-1))
	startLeases(t, ncA, "a", ttl, parts, x.runner("a"))
	waitFor(t, 10*time.Second, func() error {
		if n := x.count("a"); n != parts {
			return fmt.Errorf("a runs %d", n)
		}
		return nil
	})
	px.stall(true)
	cut := time.Now()
	startLeases(t, connect(t, s), "b", ttl, parts, x.runner("b"))
	waitFor(t, 3*ttl, func() error {
		if n := x.count("b"); n != parts {
			return fmt.Errorf("b runs %d", n)
		}
		return nil
	})
	t.Logf("takeover from a holder cut off: %v (lease TTL %v)", time.Since(cut), ttl)
	x.check(t)
	px.stall(false)
}
