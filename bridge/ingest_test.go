package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/bridge"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// corpusThread is a conformance case that starts from an empty thread, as
// the events of one thread (named after the case).
type corpusThread struct {
	thread string
	events []json.RawMessage
}

func corpusThreads(t *testing.T) []corpusThread {
	t.Helper()
	root := testsupport.ConformanceDir(t)
	files, err := filepath.Glob(filepath.Join(root, "cases", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance cases under %s: %v", root, err)
	}
	sort.Strings(files)
	var out []corpusThread
	for _, f := range files {
		var c struct {
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
		out = append(out, corpusThread{thread: thread, events: withThread(c.Events, thread)})
	}
	return out
}

// runIngest runs a pipeline.Ingest until the test ends.
func runIngest(t *testing.T, nc *nats.Conn, cfg pipeline.Config) {
	t.Helper()
	in, err := pipeline.NewIngest(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, 20*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ingest Run: %v", err)
		}
	})
	bridgeWaitFor(t, 20*time.Second, "ingest ready", in.Ready)
}

// storedThread reads a thread's messages back from the event stream and
// returns its events with their stream seqs: exactly what ingest consumed.
func storedThread(t *testing.T, js jetstream.JetStream, cfg *pipeline.Config, tenant, thread string) ([]json.RawMessage, []uint64) {
	t.Helper()
	tok := wire.EncodeThread(thread)
	st, err := js.Stream(t.Context(), cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{wire.StoredSubject(wire.Partition(tenant, tok, cfg.Partitions), tenant, tok)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var evs []json.RawMessage
	var seqs []uint64
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatalf("%s: %v", thread, err)
		}
		meta, _ := msg.Metadata()
		for _, line := range bytes.Split(msg.Data(), []byte("\n")) { // JSONL
			if line = bytes.TrimSpace(line); len(line) > 0 {
				evs = append(evs, json.RawMessage(bytes.Clone(line)))
				seqs = append(seqs, meta.Sequence.Stream)
			}
		}
		if meta.NumPending == 0 {
			return evs, seqs
		}
	}
}

// offlineView reduces events with ingest's fold (history.FoldStored) and
// returns the view.
func offlineView(t *testing.T, id string, events []json.RawMessage, seqs []uint64) map[string]any {
	t.Helper()
	th := reducer.NewThread(id)
	var dec codec.Decoder
	var ev codec.Event
	for i, raw := range events {
		err := dec.Decode(bytes.Clone(raw), &ev)
		history.FoldStored(th, id, seqs[i], &ev, err, dec.Warnings())
	}
	return viewOf(t, th.AppendView(nil))
}

func viewOf(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("view %s: %v", b, err)
	}
	return v
}

// TestBridgePostedViews posts every corpus stream (and a thread id that is
// hostile in a URL) as JSONL to the HTTP bridge: each thread's view, as
// ingest reduces it, equals the offline reduction of the events the bridge
// stored, read back from the stream.
func TestBridgePostedViews(t *testing.T) {
	env := startBridge(t, nil)
	nc := env.nc
	cfg := pipeline.DefaultConfig() // the stream's, as startBridge created it
	cfg.Shards = 2
	cfg.CheckpointInterval = 50 * time.Millisecond
	cfg.Logger = slog.New(slog.DiscardHandler)
	runIngest(t, nc, cfg)

	threads := corpusThreads(t)
	threads = append(threads, corpusThread{thread: "a/b c.d?e", events: withThread(threads[0].events, "a/b c.d?e")})
	var posted []corpusThread
	for _, ct := range threads {
		var body []byte
		for _, ev := range ct.events {
			var compact bytes.Buffer
			if err := json.Compact(&compact, ev); err != nil {
				body = append(body, ev...) // not JSON: sent as is, one line
			} else {
				body = append(body, compact.Bytes()...)
			}
			body = append(body, '\n')
		}
		req, err := http.NewRequest(http.MethodPost, env.http.URL+"/v1/ingest/acme/"+url.PathEscape(ct.thread), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", bridgeToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var br bridge.Response
		_ = json.NewDecoder(resp.Body).Decode(&br)
		resp.Body.Close()
		if br.Accepted > 0 {
			posted = append(posted, ct)
		}
	}
	if len(posted) < len(threads)/2 {
		t.Fatalf("only %d of %d streams had events accepted", len(posted), len(threads))
	}
	for _, ct := range posted {
		evs, seqs := storedThread(t, env.js, &cfg, "acme", ct.thread)
		tok := wire.EncodeThread(ct.thread)
		var snap wire.Snapshot
		bridgeWaitFor(t, 30*time.Second, ct.thread+" snapshot at its last seq", func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			msg, err := wire.Request(ctx, nc, wire.SnapSubject(wire.Partition("acme", tok, cfg.Partitions), "acme", tok), nil, 0)
			if err != nil {
				return false
			}
			snap, err = wire.ParseSnapshot(msg)
			return err == nil && snap.Seq == seqs[len(seqs)-1]
		})
		got := viewOf(t, snap.View)
		if want := offlineView(t, ct.thread, evs, seqs); !reflect.DeepEqual(got, want) {
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			t.Errorf("%s: view differs\n got %s\nwant %s", ct.thread, gb, wb)
		}
	}
}
