package fanout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// startIngest runs the real pipeline (package pipeline) on ns until the
// test ends.
func startIngest(t testing.TB, ns interface{ ClientURL() string }, parts int) {
	t.Helper()
	nc := connectURL(t, ns.ClientURL())
	cfg := pipeline.DefaultConfig()
	cfg.Partitions = parts
	cfg.Shards = 2
	cfg.CheckpointInterval = 50 * time.Millisecond
	cfg.Logger = slog.New(slog.DiscardHandler)
	in, err := pipeline.NewIngest(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx, 10*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ingest: %v", err)
		}
	})
	testsupport.WaitFor(t, 20*time.Second, "ingest ready", in.Ready)
}

// aguiMsgModel follows one assistant message ("m1") through AG-UI events
// as any AG-UI client would: snapshots replace, deltas append.
type aguiMsgModel struct {
	text      string
	snapshots int
}

func (a *aguiMsgModel) apply(t testing.TB, data string) {
	var ev struct {
		Type      string `json:"type"`
		MessageID string `json:"messageId"`
		Delta     string `json:"delta"`
		Messages  []struct {
			ID      string `json:"id"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Errorf("bad event %q: %v", data, err)
		return
	}
	switch ev.Type {
	case "MESSAGES_SNAPSHOT":
		a.snapshots++
		a.text = ""
		for _, m := range ev.Messages {
			if m.ID == "m1" {
				a.text = m.Content
			}
		}
	case "TEXT_MESSAGE_CONTENT":
		if ev.MessageID == "m1" {
			a.text += ev.Delta
		}
	}
}

// The whole path: events published to JetStream, reduced by the real
// ingest, framed, fanned out by two fanout nodes to SSE clients that join
// during the run, drop and resume on the other node with their
// Last-Event-ID. Every client ends with exactly the text of the REST view.
func TestEndToEndWithIngest(t *testing.T) {
	ns := startNATS(t)
	const parts = 8
	startIngest(t, ns, parts)
	mod := func(c *Config) { c.Hub.Partitions = parts }
	srv1, node1 := newServer(t, connect(t, ns), mod)
	srv2, node2 := newServer(t, connect(t, ns), mod)
	nodes := []string{node1.URL, node2.URL}
	tok := token(t, "acme")
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := wire.EventSubject("acme", "e2e thread") // a space: escaped token
	ctx := context.Background()
	pub := func(ev string) {
		if _, err := js.Publish(ctx, subj, []byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	pub(`{"type":"RUN_STARTED","threadId":"e2e thread","runId":"r1"}`)
	pub(`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`)

	const deltas = 600
	var want strings.Builder
	for i := 0; i < deltas; i++ {
		fmt.Fprintf(&want, "%d;", i)
	}
	finalText.Store(want.String()) // followers stop once they hold it
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	const clients = 6
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- followWithResume(t, nodes, tok, c, func() (string, bool) { return "", false })
		}()
	}
	for i := 0; i < deltas; i++ {
		d := fmt.Sprintf("%d;", i)
		pub(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"` + d + `"}`)
		if i%10 == 0 {
			time.Sleep(2 * time.Millisecond) // a pace at which frames stay small
		}
	}
	pub(`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`)
	pub(`{"type":"RUN_FINISHED","threadId":"e2e thread","runId":"r1"}`)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	resumes := counterValue(srv1.m.Resyncs.WithLabelValues(ReasonResume)) + counterValue(srv2.m.Resyncs.WithLabelValues(ReasonResume))
	joins := counterValue(srv1.m.Resyncs.WithLabelValues(ReasonJoin)) + counterValue(srv2.m.Resyncs.WithLabelValues(ReasonJoin))
	t.Logf("ring resumes %v, snapshot joins %v", resumes, joins)
	if resumes == 0 || joins < clients {
		t.Fatalf("the test did not exercise resuming: %v resumes, %v joins", resumes, joins)
	}
	// The REST view (from the pipeline's snapshot) has the same message.
	var code int
	var body string
	testsupport.WaitFor(t, 10*time.Second, "the run to finish in the view", func() bool {
		code, body = do(t, "GET", node2.URL+"/v1/threads/e2e%20thread", tok, "", nil)
		return strings.Contains(body, `"status":"finished"`)
	})
	if code != 200 || !strings.Contains(body, `"content":"`+want.String()+`"`) {
		t.Fatalf("REST view %d: %.300s", code, body)
	}
}

// finalText is set once the publisher is done; followers stop when they
// reach it.
var finalText syncString

type syncString struct {
	mu sync.Mutex
	s  string
}

func (s *syncString) Store(v string) { s.mu.Lock(); s.s = v; s.mu.Unlock() }
func (s *syncString) Load() string   { s.mu.Lock(); defer s.mu.Unlock(); return s.s }

// followWithResume reads the thread from a random node, drops the
// connection at random points and resumes on another node with its
// Last-Event-ID, until it holds the final text. Its model keeps the state
// per cursor it has seen, as a client that persisted its view would.
func followWithResume(t *testing.T, nodes []string, tok string, seed int, _ func() (string, bool)) error {
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	var a aguiMsgModel
	lastID := ""
	deadline := time.Now().Add(60 * time.Second)
	for reconnects := 0; ; reconnects++ {
		if time.Now().After(deadline) {
			return fmt.Errorf("client %d: timed out with %q", seed, shorten(a.text))
		}
		url := nodes[r.IntN(len(nodes))] + "/v1/threads/e2e%20thread/events"
		var hdr http.Header
		if lastID != "" {
			hdr = http.Header{"Last-Event-Id": {lastID}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header = hdr
		if req.Header == nil {
			req.Header = http.Header{}
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return err
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			return fmt.Errorf("client %d: status %d %s", seed, resp.StatusCode, b)
		}
		c := &sseClient{resp: resp, br: newBufReader(resp.Body), cancel: cancel}
		budget := 1 + r.IntN(6) // messages before this connection is dropped (frames are compacted: few, long)
		for budget > 0 {
			if a.text == finalText.Load() {
				c.close()
				return nil
			}
			m, err := c.next()
			if err != nil {
				c.close()
				return fmt.Errorf("client %d: %v with %q", seed, err, shorten(a.text))
			}
			if m.data != "" {
				a.apply(t, m.data)
				budget--
			}
			if m.hasID { // as EventSource does: "<seq>.snap" too (it forces a fresh snapshot)
				lastID = m.id
			}
		}
		c.close()
	}
}
