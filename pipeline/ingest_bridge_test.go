package pipeline

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/wire"
)

// storedStream reads a thread's messages back from the event stream and
// returns its events with their stream seqs: exactly what ingest consumed.
func storedStream(t *testing.T, js jetstream.JetStream, cfg *Config, tenant, thread string) ([]json.RawMessage, []uint64) {
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
		for data := msg.Data(); ; {
			ev, rest, ok := nextEvent(data)
			if !ok {
				break
			}
			evs = append(evs, json.RawMessage(bytes.Clone(ev)))
			seqs = append(seqs, meta.Sequence.Stream)
			data = rest
		}
		if meta.NumPending == 0 {
			return evs, seqs
		}
	}
}

// TestBridgePostedViews posts every corpus stream (and a thread id that is
// hostile in a URL) as JSONL to the HTTP bridge: each thread's view equals
// the offline reduction of the events the bridge stored, read back from the
// stream.
func TestBridgePostedViews(t *testing.T) {
	s := runServer(t)
	nc := connect(t, s)
	js, _ := jetstream.New(nc)
	cfg := testConfig()
	startIngest(t, nc, cfg)
	pub, err := agent.New(nc, agent.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pub.Close(t.Context()) }()
	bridge, err := NewBridge(BridgeConfig{Publisher: pub, Verify: func(*http.Request, string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/ingest/", bridge)
	hs := httptest.NewServer(mux)
	defer hs.Close()

	streams := corpusStreams(t)
	streams = append(streams, stream{tenant: "acme", thread: "a/b c.d?e", events: withThread(genStreams(t, 1, "x")[0].events, "a/b c.d?e")})
	var posted []stream
	for _, st := range streams {
		var body []byte
		for _, ev := range st.events {
			var compact bytes.Buffer
			if err := json.Compact(&compact, ev); err != nil {
				body = append(body, ev...) // not JSON: sent as is, one line
			} else {
				body = append(body, compact.Bytes()...)
			}
			body = append(body, '\n')
		}
		resp, err := http.Post(hs.URL+"/v1/ingest/acme/"+url.PathEscape(st.thread), "application/x-ndjson", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var br BridgeResponse
		_ = json.NewDecoder(resp.Body).Decode(&br)
		resp.Body.Close()
		if br.Accepted > 0 {
			posted = append(posted, st)
		}
	}
	if len(posted) < len(streams)/2 {
		t.Fatalf("only %d of %d streams had events accepted", len(posted), len(streams))
	}
	seqsOf := map[string][]uint64{}
	var stored []stream
	for _, st := range posted {
		evs, seqs := storedStream(t, js, &cfg, st.tenant, st.thread)
		seqsOf[st.tenant+"/"+st.thread] = seqs
		stored = append(stored, stream{tenant: st.tenant, thread: st.thread, events: evs})
	}
	checkViews(t, nc, cfg.Partitions, stored, seqsOf)
}
