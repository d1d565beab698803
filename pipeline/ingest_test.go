package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// stream is one thread's events, raw.
type stream struct {
	tenant, thread string
	events         []json.RawMessage
}

// corpusStreams loads the conformance cases that start from an empty thread
// as streams, one thread per case (named after the case).
func corpusStreams(t testing.TB) []stream {
	t.Helper()
	corpusRoot := testsupport.ConformanceDir(t)
	files, err := filepath.Glob(filepath.Join(corpusRoot, "cases", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance cases under %s: %v", corpusRoot, err)
	}
	sort.Strings(files)
	var out []stream
	for _, f := range files {
		var c struct {
			Name    string            `json:"name"`
			Initial json.RawMessage   `json:"initial"`
			Events  []json.RawMessage `json:"events"`
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(c.Initial) > 0 && string(c.Initial) != "null" {
			continue // starts from a RunAgentInput, which a stream cannot carry
		}
		thread := strings.TrimSuffix(filepath.Base(f), ".json")
		out = append(out, stream{tenant: "acme", thread: thread, events: withThread(c.Events, thread)})
	}
	return out
}

// offlineView reduces events directly with ingest's fold (FoldStored, as
// `threadcast reduce --thread` does) and returns the view.
func offlineView(t testing.TB, id string, events []json.RawMessage, seqs []uint64) map[string]any {
	t.Helper()
	th := reducer.NewThread(id)
	var dec codec.Decoder
	var ev codec.Event
	for i, raw := range events {
		seq := seqs[i]
		err := dec.Decode(bytes.Clone(raw), &ev)
		history.FoldStored(th, id, seq, &ev, err, dec.Warnings())
	}
	return viewOf(t, th.AppendView(nil))
}

func viewOf(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("view %s: %v", b, err)
	}
	return v
}

// testIngest runs an Ingest until stop is called; stop returns Run's error.
type testIngest struct {
	in     *Ingest
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func startIngest(t testing.TB, nc *nats.Conn, cfg Config) *testIngest {
	t.Helper()
	in, err := NewIngest(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ti := &testIngest{in: in, cancel: cancel, done: make(chan error, 1)}
	go func() { ti.done <- in.Run(ctx, 20*time.Second) }()
	t.Cleanup(func() { _ = ti.stop() })
	waitFor(t, 20*time.Second, func() error {
		select {
		case err := <-ti.done:
			ti.done <- err
			return fmt.Errorf("ingest ended: %v", err)
		default:
		}
		if !in.Ready() {
			return errors.New("not ready")
		}
		return nil
	})
	return ti
}

func (ti *testIngest) stop() error {
	ti.once.Do(func() {
		ti.cancel()
		ti.err = <-ti.done
	})
	return ti.err
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Partitions = 8
	cfg.Shards = 2
	cfg.CheckpointInterval = 50 * time.Millisecond
	cfg.Logger = discardLogger()
	return cfg
}

// publishStreams publishes every stream, one event per message, or as JSONL
// batches of up to batch events, and returns the stream seq of every event
// per thread ("tenant/thread").
func publishStreams(t testing.TB, js jetstream.JetStream, streams []stream, batch int) map[string][]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seqs := make(map[string][]uint64)
	for _, s := range streams {
		subj, err := wire.EventSubject(s.tenant, s.thread)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(s.events); {
			n := min(max(batch, 1), len(s.events)-i)
			msg := &nats.Msg{Subject: subj, Header: nats.Header{}}
			if batch > 1 {
				msg.Data = bytes.Join(bytesOf(s.events[i:i+n]), []byte("\n"))
				msg.Header.Set(wire.HeaderBatch, fmt.Sprint(n))
			} else {
				msg.Data = s.events[i]
			}
			ack, err := js.PublishMsg(ctx, msg)
			if err != nil {
				t.Fatalf("publish %s: %v", subj, err)
			}
			for range n {
				seqs[s.tenant+"/"+s.thread] = append(seqs[s.tenant+"/"+s.thread], ack.Sequence)
			}
			i += n
		}
	}
	return seqs
}

func bytesOf(rs []json.RawMessage) [][]byte {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// snapshot requests a thread's snapshot from its partition owner.
func snapshot(nc *nats.Conn, parts int, tenant, thread string) (wire.Snapshot, error) {
	tok := wire.EncodeThread(thread)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg, err := wire.Request(ctx, nc, wire.SnapSubject(wire.Partition(tenant, tok, parts), tenant, tok), nil, 0)
	if err != nil {
		return wire.Snapshot{}, err
	}
	return wire.ParseSnapshot(msg)
}

// checkViews waits until every stream's snapshot reflects its last seq and
// then compares the view with the offline reduction.
func checkViews(t testing.TB, nc *nats.Conn, parts int, streams []stream, seqs map[string][]uint64) {
	t.Helper()
	for _, s := range streams {
		var snap wire.Snapshot
		waitFor(t, 30*time.Second, func() error {
			var err error
			snap, err = snapshot(nc, parts, s.tenant, s.thread)
			if err != nil {
				return err
			}
			ss := seqs[s.tenant+"/"+s.thread]
			if want := ss[len(ss)-1]; snap.Seq != want {
				return fmt.Errorf("%s: snapshot seq %d, want %d", s.thread, snap.Seq, want)
			}
			return nil
		})
		got := viewOf(t, snap.View)
		want := offlineView(t, s.thread, s.events, seqs[s.tenant+"/"+s.thread])
		if !reflect.DeepEqual(got, want) {
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			t.Errorf("%s: view differs\n got %s\nwant %s", s.thread, gb, wb)
		}
	}
}

func TestIngestCorpusViews(t *testing.T) {
	for _, batch := range []int{1, 7} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			checkNoGoroutineLeak(t)
			s := runServer(t)
			nc := connect(t, s)
			js, _ := jetstream.New(nc)
			cfg := testConfig()
			ti := startIngest(t, nc, cfg)
			streams := corpusStreams(t)
			last := publishStreams(t, js, streams, batch)
			checkViews(t, nc, cfg.Partitions, streams, last)
			if err := ti.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

// TestHostileThreadIDsEndToEnd publishes a small stream for every hostile
// thread id through the real server and ingest: each id gets its own view,
// reachable by its snapshot, and nothing leaks between them.
func TestHostileThreadIDsEndToEnd(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	startIngest(t, nc, cfg)
	var streams []stream
	for i, id := range hostileIDs {
		streams = append(streams, stream{tenant: "acme", thread: id, events: withThread([]json.RawMessage{
			json.RawMessage(`{"type":"RUN_STARTED","threadId":"x","runId":"r"}`),
			json.RawMessage(fmt.Sprintf(`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","role":"assistant","delta":"thread %d"}`, i)),
		}, id)})
	}
	seqs := publishStreams(t, js, streams, 1)
	checkViews(t, nc, cfg.Partitions, streams, seqs)
	for i, st := range streams {
		snap, err := snapshot(nc, cfg.Partitions, st.tenant, st.thread)
		if err != nil {
			t.Fatal(err)
		}
		// JSON cannot carry invalid UTF-8: such bytes read back as U+FFFD.
		want, _ := json.Marshal(st.thread)
		var wantID string
		_ = json.Unmarshal(want, &wantID)
		if snap.Thread != wantID || !strings.Contains(string(snap.View), fmt.Sprintf(`"thread %d"`, i)) {
			t.Errorf("thread %q: snapshot of %q: %s", st.thread, snap.Thread, snap.View)
		}
	}
}

// TestSDKPublishedViews publishes the corpus and generated streams through
// the agent SDK (validated, batched by linger, de-duplicated): every event
// the SDK stored ends in a view equal to the offline reduction of exactly
// those events; the ones it refused are not in the stream at all.
func TestSDKPublishedViews(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	cfg := testConfig()
	startIngest(t, nc, cfg)
	pcfg := agent.DefaultConfig()
	pcfg.Linger = 5 * time.Millisecond
	pub, err := agent.New(nc, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pub.Close(context.Background()) }()
	all := append(corpusStreams(t), genStreams(t, 20, "sdk")...)
	type sent struct {
		f   *agent.Future
		key string
		ev  json.RawMessage
	}
	var futs []sent
	refused := 0
	for i := 0; ; i++ { // round robin across threads, so batches interleave
		any := false
		for _, st := range all {
			if i >= len(st.events) {
				continue
			}
			any = true
			f, err := pub.Publish(t.Context(), st.tenant, st.thread, st.events[i])
			if errors.Is(err, agent.ErrInvalid) {
				refused++
				continue // validated before sending: never stored
			}
			if err != nil {
				t.Fatal(err)
			}
			futs = append(futs, sent{f, st.tenant + "/" + st.thread, st.events[i]})
		}
		if !any {
			break
		}
	}
	seqs := map[string][]uint64{}
	kept := map[string][]json.RawMessage{}
	batched := false
	for _, s := range futs {
		ack, err := s.f.Wait(t.Context())
		if err != nil {
			continue // refused by the SDK's validation: never stored
		}
		batched = batched || ack.Index > 0
		seqs[s.key] = append(seqs[s.key], ack.Seq)
		kept[s.key] = append(kept[s.key], s.ev)
	}
	if !batched || refused == 0 {
		t.Errorf("batched %v, refused %d: the test must cover both batches and refusals", batched, refused)
	}
	var streams []stream
	for _, st := range all {
		if evs := kept[st.tenant+"/"+st.thread]; len(evs) > 0 {
			streams = append(streams, stream{tenant: st.tenant, thread: st.thread, events: evs})
		}
	}
	checkViews(t, nc, cfg.Partitions, streams, seqs)
}

// threadIDMember matches a "threadId" member (event or run input) in an
// event's JSON text.
var threadIDMember = regexp.MustCompile(`"threadId"(\s*):(\s*)"(?:[^"\\]|\\.)*"`)

// withThread returns events with every threadId naming thread: an event
// published to a thread must not name another (agent.ErrOtherThread), and
// the fixtures' events all say "thread-1".
func withThread(events []json.RawMessage, thread string) []json.RawMessage {
	id, _ := json.Marshal(thread)
	out := make([]json.RawMessage, len(events))
	for i, ev := range events {
		out[i] = threadIDMember.ReplaceAll(ev, append([]byte(`"threadId"$1:$2`), bytes.ReplaceAll(id, []byte("$"), []byte("$$"))...))
	}
	return out
}
