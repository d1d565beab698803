package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// counter reads a counter's value.
func counter(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestFramesFoldToView follows a thread's frames: their Tc-Prev chain is
// dense, the last one reaches the last seq, each carries its status in
// Tc-Status as in its body, and folding the frames' (compacted) events
// into an empty thread gives the same messages and state as the thread's
// view.
func TestFramesFoldToView(t *testing.T) {
	checkNoGoroutineLeak(t)
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	startIngest(t, nc, cfg)
	streams := genStreams(t, 3, "f")
	subs := make([]*nats.Subscription, len(streams))
	for i, st := range streams {
		sub, err := nc.SubscribeSync(wire.ViewSubject(st.tenant, wire.EncodeThread(st.thread)))
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = sub
	}
	seqs := map[string][]uint64{}
	mustInterleave(t, js, streams, 0, 1000, 3, seqs)
	for i, st := range streams {
		ss := seqs[st.tenant+"/"+st.thread]
		last := ss[len(ss)-1]
		th := reducer.NewThread(st.thread)
		var prev uint64
		var dec codec.Decoder
		var ev codec.Event
		for prev != last {
			msg, err := subs[i].NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("%s: frame after %d: %v", st.thread, prev, err)
			}
			seq, _ := strconv.ParseUint(msg.Header.Get(wire.HeaderSeq), 10, 64)
			hp, _ := strconv.ParseUint(msg.Header.Get(wire.HeaderPrev), 10, 64)
			f, err := wire.ParseFrame(msg.Data)
			if err != nil {
				t.Fatal(err)
			}
			if hp != prev || f.Prev != prev || f.Seq != seq || seq <= prev {
				t.Fatalf("%s: frame seq %d prev %d (body %d/%d), want prev %d", st.thread, seq, hp, f.Seq, f.Prev, prev)
			}
			if hs := msg.Header.Get(wire.HeaderStatus); f.Status == "" || hs != f.Status {
				t.Fatalf("%s: frame %d: %s %q, body status %q", st.thread, seq, wire.HeaderStatus, hs, f.Status)
			}
			for _, raw := range f.Events {
				if err := dec.Decode(bytes.Clone(raw), &ev); err != nil {
					t.Fatalf("frame event %s: %v", raw, err)
				}
				if res := th.Apply(seq, &ev); res.Fatal != nil {
					t.Fatalf("frame event %s: %v", raw, res.Fatal)
				}
			}
			prev = seq
		}
		snap, err := snapshot(nc, cfg.Partitions, st.tenant, st.thread)
		if err != nil {
			t.Fatal(err)
		}
		want := viewOf(t, snap.View)
		got := viewOf(t, th.AppendView(nil))
		for _, k := range []string{"messages", "state", "status"} {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Errorf("%s: %s from frames %v, view %v", st.thread, k, got[k], want[k])
			}
		}
		if len(snap.Events) == 0 {
			t.Errorf("%s: snapshot without AG-UI events", st.thread)
		}
	}
}

// samePartitionIDs returns n thread ids of the given tenant in one partition.
func samePartitionIDs(tenant string, parts, n int) []string {
	var ids []string
	want := -1
	for i := 0; len(ids) < n; i++ {
		id := fmt.Sprintf("t%d", i)
		p := wire.Partition(tenant, wire.EncodeThread(id), parts)
		if want < 0 {
			want = p
		}
		if p == want {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestBadInputIsolated sends broken input to one thread and a good stream to
// another thread of the same partition: the bad input is dead-lettered with
// its reason and counted, the fatal one ends the bad thread's run, warnings
// are counted, and the good thread's view is exact.
func TestBadInputIsolated(t *testing.T) {
	checkNoGoroutineLeak(t)
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.Metrics = NewMetrics(nil)
	m := cfg.Metrics
	startIngest(t, nc, cfg)
	dlq, err := nc.SubscribeSync(wire.DLQPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	ids := samePartitionIDs("acme", cfg.Partitions, 2)
	bad, good := ids[0], ids[1]
	badEvents := []json.RawMessage{
		json.RawMessage(`{"type":"RUN_STARTED","threadId":"` + bad + `","runId":"r1"}`),
		json.RawMessage(`not json at all`),                                                // decode → dead letter, rejects the run
		json.RawMessage(`{"type":"RUN_STARTED","threadId":"` + bad + `","runId":"r2"}`),   // a new run
		json.RawMessage(`{"type":"NO_SUCH_EVENT"}`),                                       // drop: warning
		json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"nope","delta":"x"}`), // protocol fatal → dead letter
	}
	goodStream := genStreams(t, 1, "x")[0]
	goodStream.thread, goodStream.events = good, withThread(goodStream.events, good)
	streams := []stream{{tenant: "acme", thread: bad, events: badEvents}, goodStream}
	seqs := publishStreams(t, js, streams, 1)
	checkViews(t, nc, cfg.Partitions, streams, seqs)

	type dead struct{ kind, seq, idx string }
	var got []dead
	for range 2 {
		msg, err := dlq.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("dead letter: %v", err)
		}
		if msg.Subject != wire.DLQSubject("acme", wire.EncodeThread(bad)) || msg.Header.Get(wire.HeaderError) == "" {
			t.Errorf("dead letter on %q with error %q", msg.Subject, msg.Header.Get(wire.HeaderError))
		}
		got = append(got, dead{msg.Header.Get(wire.HeaderErrorKind), msg.Header.Get(wire.HeaderSeq), msg.Header.Get(wire.HeaderEventIndex)})
	}
	bs := seqs["acme/"+bad]
	want := []dead{{wire.ErrKindDecode, fmt.Sprint(bs[1]), "0"}, {wire.ErrKindInvalid, fmt.Sprint(bs[4]), "0"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dead letters %v, want %v", got, want)
	}
	if extra, err := dlq.NextMsg(50 * time.Millisecond); err == nil {
		t.Errorf("unexpected dead letter %q %v", extra.Data, extra.Header)
	}
	if n := counter(t, m.DeadLetters.WithLabelValues(wire.ErrKindDecode)) + counter(t, m.DeadLetters.WithLabelValues(wire.ErrKindInvalid)); n != 2 {
		t.Errorf("dead letters counted %v, want 2", n)
	}
	if n := counter(t, m.Warnings); n < 1 {
		t.Errorf("warnings counted %v, want ≥ 1", n)
	}
	snap, err := snapshot(nc, cfg.Partitions, "acme", bad)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Status != "rejected" {
		t.Errorf("bad thread status %q, want rejected", snap.Status)
	}
}

// TestBadSubjects: a tenant that is not a valid name, or a thread token that
// is not canonical, is dead-lettered as a subject error and touches nothing.
func TestBadSubjects(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg)
	dlq, err := nc.SubscribeSync(wire.DLQPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"agui.ACME.t1.events", "agui.acme.=dDE.events", "agui.acme.a=b.events"} {
		if _, err := js.Publish(t.Context(), subj, []byte(`{"type":"RUN_STARTED","threadId":"t1","runId":"r"}`)); err != nil {
			t.Fatalf("%s: %v", subj, err)
		}
		msg, err := dlq.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: no dead letter: %v", subj, err)
		}
		if msg.Header.Get(wire.HeaderErrorKind) != wire.ErrKindSubject {
			t.Errorf("%s: kind %q", subj, msg.Header.Get(wire.HeaderErrorKind))
		}
	}
	if n := counter(t, cfg.Metrics.DeadLetters.WithLabelValues(wire.ErrKindSubject)); n != 3 {
		t.Errorf("subject dead letters %v, want 3", n)
	}
}

// TestStraysAndRefusedThreads: what `nats pub` can store but no thread can
// hold is dead-lettered with kind subject and a reason, counted, and acked —
// a subject with a wildcard token (which the stream stores untransformed,
// where no partition reads) and a thread token of an id no thread may have
// (empty, not UTF-8) — and none of them becomes a thread.
func TestStraysAndRefusedThreads(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg)
	dlq, err := nc.SubscribeSync(wire.DLQPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		subj, wantDLQ, wantReason string
	}{
		{"agui.acme.*.events", "dlq.acme._", "wildcard"},
		{"agui.*.t1.events", "dlq._.t1", "wildcard"},
		{"agui.*.*.events", "dlq._._", "wildcard"},
		{"agui.acme.=.events", "dlq.acme._", "empty thread id"},
		{"agui.acme." + wire.EncodeThread("\xff\xfe") + ".events", "dlq.acme._", "not valid UTF-8"},
	}
	for _, tt := range tests {
		if _, err := js.Publish(t.Context(), tt.subj, []byte(`{"type":"RUN_STARTED","threadId":"t1","runId":"r"}`)); err != nil {
			t.Fatalf("%s: %v", tt.subj, err)
		}
		msg, err := dlq.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: no dead letter: %v", tt.subj, err)
		}
		if msg.Subject != tt.wantDLQ || msg.Header.Get(wire.HeaderErrorKind) != wire.ErrKindSubject ||
			!strings.Contains(msg.Header.Get(wire.HeaderError), tt.wantReason) || msg.Header.Get(wire.HeaderSeq) == "" {
			t.Errorf("%s: dead letter on %s, kind %q, reason %q; want %s, %s, %q",
				tt.subj, msg.Subject, msg.Header.Get(wire.HeaderErrorKind), msg.Header.Get(wire.HeaderError), tt.wantDLQ, wire.ErrKindSubject, tt.wantReason)
		}
	}
	if n := counter(t, cfg.Metrics.DeadLetters.WithLabelValues(wire.ErrKindSubject)); n != float64(len(tests)) {
		t.Errorf("subject dead letters %v, want %d", n, len(tests))
	}
	waitFor(t, 10*time.Second, func() error {
		cons, err := js.Consumer(t.Context(), cfg.Stream, cfg.ConsumerPrefix+"-strays")
		if err != nil {
			return err
		}
		info, err := cons.Info(t.Context())
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 || info.Delivered.Stream == 0 {
			return fmt.Errorf("strays consumer: %d pending, %d unacked", info.NumPending, info.NumAckPending)
		}
		return nil
	})
	if extra, err := dlq.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("one dead letter too many: %s %q", extra.Subject, extra.Header.Get(wire.HeaderError))
	}
	kv, err := js.KeyValue(t.Context(), cfg.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		if tenant, _, err := wire.ParseCheckpointKey(k); err == nil && tenant == "acme" {
			t.Errorf("a thread was made: checkpoint %q", k)
		}
	}
}

// TestUndecodableMessageOneDeadLetter: an 800 KB message of 3,551 lines that
// are no event is one dead letter (it was one per line), and a thread's
// run is rejected once.
func TestUndecodableMessageOneDeadLetter(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg)
	dlq, err := nc.SubscribeSync(wire.DLQPrefix + ".acme.>")
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("\x01garbage~", 25) + "\n" // 226 bytes, not JSON
	body := []byte(strings.Repeat(line, 3551))
	subj, _ := wire.EventSubject("acme", "blob")
	if _, err := js.Publish(t.Context(), subj, body); err != nil {
		t.Fatal(err)
	}
	msg, err := dlq.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(wire.HeaderErrorKind) != wire.ErrKindDecode || len(msg.Data) != len(body)-1 {
		t.Errorf("dead letter kind %q of %d bytes, want decode, the whole message", msg.Header.Get(wire.HeaderErrorKind), len(msg.Data))
	}
	if extra, err := dlq.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("a second dead letter (%d bytes): one per message, not per line", len(extra.Data))
	}
	if n := counter(t, cfg.Metrics.DeadLetters.WithLabelValues(wire.ErrKindDecode)); n != 1 {
		t.Errorf("decode dead letters %v, want 1", n)
	}
}

// TestOtherThreadDeadLettered: an event sent by hand (no SDK to refuse it)
// whose threadId or input.threadId names another thread than its subject's
// is removed with a warning in the view and a dead letter (kind invalid),
// and the thread's own events around it are applied.
func TestOtherThreadDeadLettered(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg)
	dlq, err := nc.SubscribeSync(wire.DLQPrefix + ".acme.>")
	if err != nil {
		t.Fatal(err)
	}
	events := []json.RawMessage{
		json.RawMessage(`{"type":"RUN_STARTED","threadId":"intruder","runId":"r0"}`),
		json.RawMessage(`{"type":"RUN_STARTED","threadId":"t1","runId":"r1","input":{"threadId":"t2","runId":"r1","messages":[]}}`),
		json.RawMessage(`{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}`),
		json.RawMessage(`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","role":"assistant","delta":"mine"}`),
		json.RawMessage(`{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`),
	}
	seqs := publishStreams(t, js, []stream{{tenant: "acme", thread: "t1", events: events}}, 1)
	for _, want := range []string{`threadId "intruder" is not the thread "t1"`, `input.threadId "t2" is not the thread "t1"`} {
		msg, err := dlq.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("no dead letter for %s: %v", want, err)
		}
		if msg.Subject != "dlq.acme.t1" || msg.Header.Get(wire.HeaderErrorKind) != wire.ErrKindInvalid || !strings.Contains(msg.Header.Get(wire.HeaderError), want) {
			t.Errorf("dead letter %s %q %q, want one saying %s", msg.Subject, msg.Header.Get(wire.HeaderErrorKind), msg.Header.Get(wire.HeaderError), want)
		}
	}
	var snap wire.Snapshot
	waitFor(t, 10*time.Second, func() error {
		snap, err = snapshot(nc, cfg.Partitions, "acme", "t1")
		if err == nil && snap.Seq != seqs["acme/t1"][4] {
			err = fmt.Errorf("seq %d", snap.Seq)
		}
		return err
	})
	if !strings.Contains(string(snap.View), `"content":"mine"`) || !strings.Contains(string(snap.View), `"warnings":2`) ||
		!strings.Contains(string(snap.View), `{"runId":"r1","threadId":"t1","status":"finished","verdict":"ok"}`) || strings.Contains(string(snap.View), "r0") {
		t.Errorf("view %s: want run r1 finished with the message, two warnings, no r0", snap.View)
	}
	if n := counter(t, cfg.Metrics.DeadLetters.WithLabelValues(wire.ErrKindInvalid)); n != 2 {
		t.Errorf("invalid dead letters %v, want 2", n)
	}
}

// TestTapAndRunSummary: accepted events appear normalized on the tap, and a
// finished run is summarised with its counts and token usage.
func TestTapAndRunSummary(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	startIngest(t, nc, cfg)
	tap, err := nc.SubscribeSync(wire.TapPrefix + ".acme.>")
	if err != nil {
		t.Fatal(err)
	}
	events := []json.RawMessage{
		json.RawMessage(`{"type":"RUN_STARTED","threadId":"s1","runId":"r1","timestamp":1000,"unknownProp":1}`),
		json.RawMessage(`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`),
		json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hi"}`),
		json.RawMessage(`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`),
		json.RawMessage(`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","parentMessageId":"m1"}`),
		json.RawMessage(`{"type":"TOOL_CALL_END","toolCallId":"c1"}`),
		json.RawMessage(`{"type":"RUN_FINISHED","threadId":"s1","runId":"r1","timestamp":3500,` +
			`"usage":[{"provider":"p","model":"m","inputTokens":10,"outputTokens":5,"totalTokens":15},{"provider":"p","model":"n","inputTokens":1}]}`),
	}
	publishStreams(t, js, []stream{{tenant: "acme", thread: "s1", events: events}}, 1)
	var types []string
	var sum RunSummary
	for len(types) < len(events)+1 {
		msg, err := tap.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("tap after %v: %v", types, err)
		}
		parts := strings.Split(msg.Subject, ".")
		types = append(types, parts[2])
		if parts[2] == wire.RunSummaryType {
			if err := json.Unmarshal(msg.Data, &sum); err != nil {
				t.Fatal(err)
			}
		}
		if parts[2] == "RUN_STARTED" && bytes.Contains(msg.Data, []byte("unknownProp")) {
			t.Errorf("tap event not normalized: %s", msg.Data)
		}
	}
	wantTypes := []string{"RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_END", "RUN_FINISHED", wire.RunSummaryType}
	if !reflect.DeepEqual(types, wantTypes) {
		t.Errorf("tap types %v, want %v", types, wantTypes)
	}
	if sum.Thread != "s1" || sum.RunID != "r1" || sum.Outcome != "success" || sum.DurationMs != 2500 ||
		sum.Messages != 1 || sum.ToolCalls != 1 || sum.Events != 7 ||
		sum.InputTokens != 11 || sum.OutputTokens != 5 || sum.TotalTokens != 15 || len(sum.Usage) != 2 ||
		sum.Usage[1].OutputTokens != nil {
		t.Errorf("run summary %+v", sum)
	}
}

// TestEvictionReload runs with a memory budget so small that every clean
// thread is evicted after each batch: threads are reloaded from their
// checkpoints and the views stay exact.
func TestEvictionReload(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	cfg.MemoryBudget = 1
	cfg.CheckpointEvery = 1
	cfg.Metrics = NewMetrics(nil)
	startIngest(t, nc, cfg)
	streams := genStreams(t, 20, "e")
	seqs := map[string][]uint64{}
	for lo := 0; lo < 30; lo += 10 {
		mustInterleave(t, js, streams, lo, lo+10, 2, seqs)
		waitFor(t, 30*time.Second, func() error { return allApplied(nc, cfg.Partitions, streams, seqs) })
	}
	checkViews(t, nc, cfg.Partitions, streams, seqs)
	if counter(t, cfg.Metrics.Evictions) == 0 || counter(t, cfg.Metrics.Loads) == 0 {
		t.Errorf("evictions %v, loads %v: want both > 0", counter(t, cfg.Metrics.Evictions), counter(t, cfg.Metrics.Loads))
	}
}

// TestSnapshotErrors: a request naming the wrong partition or a malformed
// thread is refused with a reason; a thread never seen is found=false at 0.
func TestSnapshotErrors(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	cfg := testConfig()
	startIngest(t, nc, cfg)
	tok := wire.EncodeThread("never")
	p := wire.Partition("acme", tok, cfg.Partitions)
	snap, err := snapshot(nc, cfg.Partitions, "acme", "never")
	if err != nil || snap.Found || snap.Seq != 0 {
		t.Errorf("unknown thread: %+v, %v", snap, err)
	}
	for _, tt := range []struct{ subj, kind string }{
		{wire.SnapSubject((p+1)%cfg.Partitions, "acme", tok), wire.SnapErrPartition},
		{wire.SnapSubject(p, "acme", "a=b"), wire.SnapErrBadRequest},
		{wire.SnapSubject(p, "ACME", tok), wire.SnapErrBadRequest},
	} {
		msg, err := nc.Request(tt.subj, nil, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tt.subj, err)
		}
		if _, err := wire.ParseSnapshot(msg); err == nil || msg.Header.Get(wire.HeaderErrorKind) != tt.kind {
			t.Errorf("%s: kind %q, err %v; want %s", tt.subj, msg.Header.Get(wire.HeaderErrorKind), err, tt.kind)
		}
	}
}
