package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// bigThread returns the events of one run of msgs assistant messages of
// text bytes each (START, CONTENT, END), and, when stateKeys > 0, a state
// built by STATE_DELTAs adding stateKeys keys of stateBytes each. The text
// of each message is unique, so a lost or duplicated event shows.
func bigThread(thread string, msgs, text, stateKeys, stateBytes int) []json.RawMessage {
	evs := []json.RawMessage{json.RawMessage(`{"type":"RUN_STARTED","threadId":"` + thread + `","runId":"r1"}`)}
	pad := strings.Repeat("x", max(0, text-12))
	for i := range msgs {
		id := "m" + strconv.Itoa(i)
		evs = append(evs,
			json.RawMessage(`{"type":"TEXT_MESSAGE_START","messageId":"`+id+`","role":"assistant"}`),
			json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"`+id+`","delta":"`+fmt.Sprintf("%010d", i)+pad+`"}`),
			json.RawMessage(`{"type":"TEXT_MESSAGE_END","messageId":"`+id+`"}`))
	}
	if stateKeys > 0 {
		evs = append(evs, json.RawMessage(`{"type":"STATE_SNAPSHOT","snapshot":{}}`))
		val := strings.Repeat("s", stateBytes)
		for i := range stateKeys {
			evs = append(evs, json.RawMessage(`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/k`+strconv.Itoa(i)+`","value":"`+val+`"}]}`))
		}
		evs = append(evs, json.RawMessage(`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/k0","value":"changed"}]}`))
	}
	return append(evs, json.RawMessage(`{"type":"RUN_FINISHED","threadId":"`+thread+`","runId":"r1"}`))
}

// publishBatches publishes events as JSONL messages of at most maxBytes
// each and returns every event's stream seq.
func publishBatches(t testing.TB, js jetstream.JetStream, tenant, thread string, events []json.RawMessage, maxBytes int) []uint64 {
	t.Helper()
	subj, err := wire.EventSubject(tenant, thread)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var seqs []uint64
	var futs []jetstream.PubAckFuture
	var counts []int
	flush := func(batch []json.RawMessage) {
		msg := &nats.Msg{Subject: subj, Data: joinLines(batch), Header: nats.Header{wire.HeaderBatch: {strconv.Itoa(len(batch))}}}
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			t.Fatal(err)
		}
		futs, counts = append(futs, f), append(counts, len(batch))
	}
	var batch []json.RawMessage
	size := 0
	for _, e := range events {
		if len(batch) > 0 && size+len(e)+1 > maxBytes-512 {
			flush(batch)
			batch, size = nil, 0
		}
		batch = append(batch, e)
		size += len(e) + 1
	}
	if len(batch) > 0 {
		flush(batch)
	}
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			for range counts[i] {
				seqs = append(seqs, ack.Sequence)
			}
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	return seqs
}

// frameFolder follows one thread's frames through a wire.Assembler and
// folds their events, as a fanout feed does.
type frameFolder struct {
	sub    *nats.Subscription
	asm    wire.Assembler
	th     *reducer.Thread
	prev   uint64
	frames int
	parted int // frames that came in parts
	dec    codec.Decoder
	ev     codec.Event
}

func newFrameFolder(t testing.TB, nc *nats.Conn, tenant, thread string) *frameFolder {
	t.Helper()
	sub, err := nc.SubscribeSync(wire.ViewSubject(tenant, wire.EncodeThread(thread)))
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return &frameFolder{sub: sub, th: reducer.NewThread(thread)}
}

// follow folds frames until the one at last; the chain must be dense.
func (ff *frameFolder) follow(t testing.TB, last uint64) {
	t.Helper()
	for ff.prev != last {
		part, err := ff.sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("frame after %d: %v", ff.prev, err)
		}
		if part.Header.Get(wire.HeaderPart) != "" && strings.HasPrefix(part.Header.Get(wire.HeaderPart), "0/") {
			ff.parted++
		}
		msg, err := ff.asm.Add(part)
		if err != nil {
			t.Fatal(err)
		}
		if msg == nil {
			continue
		}
		ff.frames++
		seq, _ := strconv.ParseUint(msg.Header.Get(wire.HeaderSeq), 10, 64)
		f, err := wire.ParseFrame(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		if f.Prev != ff.prev || f.Seq != seq {
			t.Fatalf("frame seq %d prev %d, want prev %d", f.Seq, f.Prev, ff.prev)
		}
		for _, raw := range f.Events {
			if err := ff.dec.Decode(bytes.Clone(raw), &ff.ev); err != nil {
				t.Fatalf("frame event: %v", err)
			}
			ff.th.Apply(seq, &ff.ev)
		}
		ff.prev = seq
	}
}

func sameView(t testing.TB, what string, got, want map[string]any) {
	t.Helper()
	for _, k := range []string{"messages", "state", "status"} {
		if !reflect.DeepEqual(got[k], want[k]) {
			g, _ := json.Marshal(got[k])
			w, _ := json.Marshal(want[k])
			t.Errorf("%s: %s differs from the offline reduction (%d vs %d bytes)", what, k, len(g), len(w))
		}
	}
}

// TestLargeThreadInParts runs ingest on a server whose max payload is
// 64 KiB, so that a 1.5 MB view, its frames and its tap messages cannot be
// one NATS message each. The frames, joined and folded, the snapshot reply
// and the tap all equal the offline reduction of what was stored; the
// metrics show that parts were used for each.
func TestLargeThreadInParts(t *testing.T) {
	checkNoGoroutineLeak(t)
	sc := natsembed.DefaultConfig()
	sc.StoreDir = t.TempDir()
	sc.MaxPayload = 64 << 10
	s, err := natsembed.Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.MaxMsgSize = 64 << 10
	cfg.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg)

	const tenant, thread = "acme", "big-parts"
	ff := newFrameFolder(t, nc, tenant, thread)
	tap, err := nc.SubscribeSync(wire.TapPrefix + "." + tenant + ".TEXT_MESSAGE_CONTENT.*")
	if err != nil {
		t.Fatal(err)
	}
	_ = tap.SetPendingLimits(-1, -1)
	// 300 messages of 5 kB, and a 62 kB text: one event larger than a
	// part, so its tap message and its frame are in parts.
	events := bigThread(thread, 300, 5000, 0, 0)
	huge := json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m299","delta":"` + strings.Repeat("h", 62000) + `"}`)
	events = append(events[:len(events)-2:len(events)-2], huge, events[len(events)-2], events[len(events)-1])
	seqs := publishBatches(t, js, tenant, thread, events, 60<<10)
	ff.follow(t, seqs[len(seqs)-1])
	want := offlineView(t, thread, events, seqs)
	sameView(t, "frames", viewOf(t, ff.th.AppendView(nil)), want)

	snap, err := snapshot(nc, cfg.Partitions, tenant, thread)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Seq != seqs[len(seqs)-1] {
		t.Fatalf("snapshot at %d, want %d", snap.Seq, seqs[len(seqs)-1])
	}
	sameView(t, "snapshot", viewOf(t, snap.View), want)
	if len(snap.View) < 1<<20 {
		t.Fatalf("view of %d bytes: too small to need parts", len(snap.View))
	}

	var asm wire.Assembler
	var contents []string
	for len(contents) < 301 {
		part, err := tap.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("tap after %d: %v", len(contents), err)
		}
		msg, err := asm.Add(part)
		if err != nil {
			t.Fatal(err)
		}
		if msg != nil {
			var ev struct{ Delta string }
			if err := json.Unmarshal(msg.Data, &ev); err != nil {
				t.Fatal(err)
			}
			contents = append(contents, ev.Delta)
		}
	}
	if contents[300] != strings.Repeat("h", 62000) {
		t.Errorf("the large tap message arrived as %d bytes", len(contents[300]))
	}
	for _, what := range []string{sendFrame, sendSnapshot, sendTap} {
		if n := counter(t, cfg.Metrics.Parted.WithLabelValues(what)); n == 0 {
			t.Errorf("no %s sent in parts", what)
		}
		if n := counter(t, cfg.Metrics.PublishErrors.WithLabelValues(what)); n != 0 {
			t.Errorf("%v %s publish errors", n, what)
		}
	}
	if ff.parted == 0 {
		t.Error("no frame arrived in parts")
	}
}

// lockedBuffer is a log sink written by several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// failingPub passes messages to a connection, except those larger than
// limit, which it refuses as the connection refuses a message over the
// server's max payload.
type failingPub struct {
	*nats.Conn
	limit int
}

func (p failingPub) PublishMsg(m *nats.Msg) error {
	if len(m.Data) > p.limit {
		return nats.ErrMaxPayload
	}
	return p.Conn.PublishMsg(m)
}

// TestSendFailures: a frame, a tap message and a snapshot reply that cannot
// be sent are counted (PublishErrors) and logged; the snapshot's requester
// gets an "unsent" error reply at once instead of waiting for its timeout,
// and the lost frame shows to subscribers as a gap in the Tc-Prev chain.
func TestSendFailures(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	cfg := DefaultConfig()
	cfg.Partitions = 1
	m := NewMetrics(nil)
	logs := &lockedBuffer{}
	sh := newShard(0, &cfg, slog.New(slog.NewTextHandler(logs, nil)), m, failingPub{nc, 1000}, memStore{})
	sh.partSize = 1 << 20 // so that failingPub, not parts, decides
	ps := &partState{p: 0, dirty: make(map[*hotThread]struct{})}
	sh.parts[0] = ps
	th := sh.thread(context.Background(), ps, threadKey{"acme", "t1"})
	frames, err := nc.SubscribeSync(wire.ViewSubject("acme", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()

	sh.now = time.Now()
	sh.apply(th, 1, []byte(`{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`), nil)
	sh.flush(context.Background(), false)
	sh.apply(th, 2, []byte(`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`+"\n"+
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"`+strings.Repeat("x", 2000)+`"}`), nil)
	sh.flush(context.Background(), false) // this frame is refused
	sh.apply(th, 3, []byte(`{"type":"TEXT_MESSAGE_END","messageId":"m"}`), nil)
	sh.flush(context.Background(), false)
	var got []string
	for range 2 {
		f, err := frames.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.Header.Get(wire.HeaderPrev)+"→"+f.Header.Get(wire.HeaderSeq))
	}
	if want := []string{"0→1", "2→3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("frames %v, want %v (the lost frame leaves a gap that Tc-Prev shows)", got, want)
	}
	if n := counter(t, m.PublishErrors.WithLabelValues(sendFrame)); n != 1 {
		t.Errorf("frame publish errors %v, want 1", n)
	}
	if n := counter(t, m.PublishErrors.WithLabelValues(sendTap)); n != 1 {
		t.Errorf("tap publish errors %v, want 1 (the 2 kB content event)", n)
	}

	// The snapshot reply (view of 2 kB) cannot be sent: the requester is
	// told so at once.
	sub, err := nc.Subscribe(wire.SnapPartitionWildcard(0), func(req *nats.Msg) {
		sh.snapshot(context.Background(), snapGroup{subject: req.Subject, reqs: []*nats.Msg{req}})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = nc.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	reply, err := wire.Request(ctx, nc, wire.SnapSubject(0, "acme", "t1"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, perr := wire.ParseSnapshot(reply)
	if reply.Header.Get(wire.HeaderErrorKind) != wire.SnapErrUnsent || perr == nil {
		t.Fatalf("reply %v, %v; want an %q error", reply.Header, perr, wire.SnapErrUnsent)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("the error reply took %v", time.Since(start))
	}
	if n := counter(t, m.PublishErrors.WithLabelValues(sendSnapshot)); n != 1 {
		t.Errorf("snapshot publish errors %v, want 1", n)
	}
	if !strings.Contains(logs.String(), "could not send") || !strings.Contains(logs.String(), "what=frame") {
		t.Errorf("no log of the failures: %s", logs.String())
	}
	// respondParts refuses a request without a reply subject.
	if err := sh.respondParts(&nats.Msg{Subject: "x"}, nil, nil); !errors.Is(err, nats.ErrMsgNoReply) {
		t.Errorf("no reply subject: %v", err)
	}
}

// TestLargeEventAndState: with the defaults, a single 5 MB event is
// accepted, and an 8 MB state built by STATE_DELTAs is served (a snapshot
// reply of about 26 MB: in parts and two windows); the frames (folded),
// the snapshot and the checkpoint (reloaded by a second ingest) all equal
// the offline reduction. TestLargeState20MB (integration tag) does the same
// with a 20 MB state, over a minute under -race.
func TestLargeEventAndState(t *testing.T) { checkLargeEventAndState(t, 8) }

func checkLargeEventAndState(t *testing.T, stateMB int) {
	checkNoGoroutineLeak(t)
	s := runServer(t)
	nc := connect(t, s)
	if nc.MaxPayload() != DefaultMaxMsgSize {
		t.Fatalf("embedded server max payload %d, want %d", nc.MaxPayload(), DefaultMaxMsgSize)
	}
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.Metrics = NewMetrics(nil)
	in := startIngest(t, nc, cfg)

	const tenant, thread = "acme", "large-state"
	ff := newFrameFolder(t, nc, tenant, thread)
	events := bigThread(thread, 10, 100, stateMB, 1<<20)
	five := json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m9","delta":"` + strings.Repeat("5", 5<<20) + `"}`)
	events = append(events[:30:30], append([]json.RawMessage{five}, events[30:]...)...) // before m9's END
	seqs := publishBatches(t, js, tenant, thread, events, DefaultMaxMsgSize)
	last := seqs[len(seqs)-1]
	ff.follow(t, last)
	want := offlineView(t, thread, events, seqs)
	sameView(t, "frames", viewOf(t, ff.th.AppendView(nil)), want)
	var snap wire.Snapshot
	waitFor(t, 60*time.Second, func() (err error) { snap, err = snapshot(nc, cfg.Partitions, tenant, thread); return err })
	if min := (stateMB + 4) << 20; snap.Seq != last || len(snap.View) < min {
		t.Fatalf("snapshot at %d of %d bytes, want %d and > %d bytes", snap.Seq, len(snap.View), last, min)
	}
	sameView(t, "snapshot", viewOf(t, snap.View), want)
	if n := counter(t, cfg.Metrics.Parted.WithLabelValues(sendSnapshot)); n == 0 {
		t.Error("the snapshot was not sent in parts")
	}

	// A fresh ingest loads the (chunked) checkpoint and answers the same.
	if err := in.stop(); err != nil {
		t.Fatal(err)
	}
	startIngest(t, nc, cfg)
	var snap2 wire.Snapshot
	waitFor(t, 60*time.Second, func() (err error) { snap2, err = snapshot(nc, cfg.Partitions, tenant, thread); return err })
	if snap2.Seq != last {
		t.Fatalf("after restart: seq %d, want %d", snap2.Seq, last)
	}
	sameView(t, "snapshot after restart", viewOf(t, snap2.View), want)
}

// TestViewLimit: a thread whose view would pass MaxViewBytes has its run
// ended (status rejected, the reason in the view), the refused event
// dead-lettered with kind too-big and counted; the thread stays readable,
// and another thread of the same partition is unaffected.
func TestViewLimit(t *testing.T) {
	checkNoGoroutineLeak(t)
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.MaxViewBytes = 200 << 10
	cfg.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg)
	dlq, err := nc.SubscribeSync(wire.DLQPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	ids := samePartitionIDs("acme", cfg.Partitions, 2)
	big, small := ids[0], ids[1]
	bigEvents := bigThread(big, 100, 4000, 0, 0) // ~400 kB of text
	smallEvents := bigThread(small, 5, 100, 0, 0)
	bigSeqs := publishBatches(t, js, "acme", big, bigEvents, 1) // one event per message
	smallSeqs := publishBatches(t, js, "acme", small, smallEvents, 1)

	msg, err := dlq.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != wire.DLQSubject("acme", wire.EncodeThread(big)) || msg.Header.Get(wire.HeaderErrorKind) != wire.ErrKindTooBig ||
		!strings.Contains(msg.Header.Get(wire.HeaderError), "--max-view-bytes") {
		t.Fatalf("dead letter on %s: %v", msg.Subject, msg.Header)
	}
	refused, _ := strconv.ParseUint(msg.Header.Get(wire.HeaderSeq), 10, 64)
	first := -1
	for i, s := range bigSeqs {
		if s == refused {
			first = i
		}
	}
	if first < 10 || first > len(bigEvents)-5 {
		t.Fatalf("refused event %d of %d: the limit should be reached midway", first, len(bigEvents))
	}
	waitFor(t, 10*time.Second, func() error {
		sn, err := snapshot(nc, cfg.Partitions, "acme", big)
		if err != nil {
			return err
		}
		if sn.Seq != bigSeqs[len(bigSeqs)-1] {
			return fmt.Errorf("big at %d", sn.Seq)
		}
		if sn.Status != "rejected" || !bytes.Contains(sn.View, []byte("view too large")) {
			return fmt.Errorf("status %s, view without the reason", sn.Status)
		}
		// Exactly the events before the refused one are in the view.
		got, want := viewOf(t, sn.View), offlineView(t, big, bigEvents[:first], bigSeqs[:first])
		if !reflect.DeepEqual(got["messages"], want["messages"]) {
			return errors.New("big: messages differ from the reduction of the events before the limit")
		}
		evs := bytes.Join(bytesOf(sn.Events), nil)
		if !bytes.Contains(evs, []byte(`"RUN_ERROR"`)) {
			return errors.New("big: no RUN_ERROR among the snapshot events")
		}
		return nil
	})
	if n := counter(t, cfg.Metrics.ViewLimit); n < 1 {
		t.Errorf("view limit counter %v", n)
	}
	checkViews(t, nc, cfg.Partitions, []stream{{"acme", small, smallEvents}}, map[string][]uint64{"acme/" + small: smallSeqs})
}

// TestViewLimitSameAfterEviction: whether an event passes MaxViewBytes does
// not depend on whether its thread was evicted and reloaded before it. The
// stream makes Thread.MemSize differ between the two (a live thread's text
// buffer has grown by appending, a reloaded one's is exact), and the limit
// is set between them; the thread's status after the event must be the
// same either way.
func TestViewLimitSameAfterEviction(t *testing.T) {
	first := []string{
		`{"type":"RUN_STARTED","threadId":"mv","runId":"r1"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
	}
	for i := 0; i < 300; i++ {
		first = append(first, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"0123456789"}`)
	}
	second := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"` + strings.Repeat("x", 100) + `"}`

	// The thread's memory live and reloaded: the limit goes between them.
	th := reducer.NewThread("mv")
	var d codec.Decoder
	var e codec.Event
	for _, s := range first {
		if err := d.Decode([]byte(s), &e); err != nil {
			t.Fatal(err)
		}
		th.Apply(1, &e)
	}
	live := th.MemSize()
	re, err := reducer.LoadCheckpoint(th.AppendCheckpoint(nil))
	if err != nil {
		t.Fatal(err)
	}
	reloaded := re.MemSize()
	if live == reloaded {
		t.Fatalf("MemSize %d both live and reloaded: the stream no longer tells the layouts apart", live)
	}
	limit := int64(min(live, reloaded) + len(second) + 1) // between the two

	status := func(budget int64) string {
		s := runServer(t)
		nc := connect(t, s)
		js, _ := jetstream.New(nc)
		cfg := testConfig()
		cfg.MaxViewBytes = limit
		cfg.CheckpointEvery = 1
		cfg.Metrics = NewMetrics(nil)
		if budget > 0 {
			cfg.MemoryBudget = budget
		}
		ti := startIngest(t, nc, cfg)
		defer ti.stop()
		subj, _ := wire.EventSubject("acme", "mv")
		pub := func(body string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: []byte(body)}); err != nil {
				t.Fatal(err)
			}
		}
		pub(strings.Join(first, "\n"))
		waitFor(t, 10*time.Second, func() error {
			if counter(t, cfg.Metrics.Checkpoints) == 0 {
				return errors.New("no checkpoint yet")
			}
			if budget > 0 && counter(t, cfg.Metrics.Evictions) == 0 {
				return errors.New("not evicted yet")
			}
			return nil
		})
		pub(second)
		var st string
		waitFor(t, 10*time.Second, func() error {
			snap, err := snapshot(nc, cfg.Partitions, "acme", "mv")
			if err != nil {
				return err
			}
			if snap.Seq < 2 {
				return fmt.Errorf("seq %d", snap.Seq)
			}
			st = fmt.Sprint(viewOf(t, snap.View)["status"])
			return nil
		})
		return st
	}
	kept, evicted := status(0), status(1)
	t.Logf("MemSize live %d, reloaded %d, MaxViewBytes %d", live, reloaded, limit)
	if kept != evicted {
		t.Errorf("status kept in memory %q, evicted and reloaded %q", kept, evicted)
	}
}
