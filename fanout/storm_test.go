package fanout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// startIngestWith runs the real pipeline on ns with cfg (Partitions set by
// the caller) until the test ends.
func startIngestWith(t testing.TB, ns interface{ ClientURL() string }, cfg pipeline.Config) {
	t.Helper()
	nc := connectURL(t, ns.ClientURL())
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

// TestJoinStorm: many subscribers over many threads join at once against
// the real pipeline with a tiny snapshot queue (4 threads per shard, so
// most requests are first answered "busy"). The hub's retries turn the
// storm into waiting: every subscriber joins (no 5xx) and sees its thread's
// text, and the busy replies and retries are counted.
func TestJoinStorm(t *testing.T) {
	threads, perThread := 200, 10
	if testing.Short() {
		threads, perThread = 50, 4
	}
	ns := startNATS(t)
	const parts = 8
	pm := pipeline.NewMetrics(nil)
	pc := pipeline.DefaultConfig()
	pc.Partitions, pc.Shards, pc.SnapshotQueue = parts, 2, 4
	pc.CheckpointInterval = 50 * time.Millisecond
	pc.Logger = slog.New(slog.DiscardHandler)
	pc.Metrics = pm
	startIngestWith(t, ns, pc)
	srv, node := newServer(t, connect(t, ns), func(c *Config) { c.Hub.Partitions = parts })

	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	id := func(i int) string { return fmt.Sprintf("storm-%d", i) }
	var acks []jetstream.PubAckFuture
	for i := range threads {
		subj, _ := wire.EventSubject("acme", id(i))
		for _, ev := range []string{
			fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":"r1"}`, id(i)),
			`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
			fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hello %d"}`, i),
			`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
		} {
			a, err := js.PublishAsync(subj, []byte(ev))
			if err != nil {
				t.Fatal(err)
			}
			acks = append(acks, a)
		}
	}
	for _, a := range acks {
		select {
		case <-a.Ok():
		case err := <-a.Err():
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatal("publish ack timed out")
		}
	}
	// Every thread is applied before the storm (a direct request, retried
	// while busy, tells).
	nc := connect(t, ns)
	testsupport.WaitFor(t, 30*time.Second, "every thread applied", func() bool {
		for i := range threads {
			tok := wire.EncodeThread(id(i))
			m, err := nc.Request(wire.SnapSubject(wire.Partition("acme", tok, parts), "acme", tok), nil, 5*time.Second)
			if err != nil {
				return false
			}
			if s, err := wire.ParseSnapshot(m); err != nil || s.Seq == 0 {
				return false
			}
		}
		return true
	})
	busyBefore := counterValue(pm.Snapshots.WithLabelValues("busy"))

	tok := token(t, "acme")
	tr := &http.Transport{MaxIdleConnsPerHost: -1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		joined  atomic.Int64
		mu      sync.Mutex
		failure []string
	)
	fail := func(f string, a ...any) {
		mu.Lock()
		if len(failure) < 10 {
			failure = append(failure, fmt.Sprintf(f, a...))
		}
		mu.Unlock()
	}
	for i := range threads * perThread {
		wg.Add(1)
		go func() {
			defer wg.Done()
			th := i % threads
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", node.URL+"/v1/threads/"+id(th)+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			<-start
			resp, err := client.Do(req)
			if err != nil {
				fail("subscriber %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				fail("subscriber %d: status %d %s", i, resp.StatusCode, b)
				return
			}
			c := &sseClient{resp: resp, br: newBufReader(resp.Body), cancel: cancel}
			var a aguiMsgModel
			want := fmt.Sprintf("hello %d", th)
			for a.snapshots == 0 || a.text != want {
				m, err := c.next()
				if err != nil {
					fail("subscriber %d: %v with %q", i, err, a.text)
					return
				}
				if m.data != "" {
					a.apply(t, m.data)
				}
			}
			joined.Add(1)
		}()
	}
	close(start)
	wg.Wait()
	for _, f := range failure {
		t.Error(f)
	}
	busy := counterValue(pm.Snapshots.WithLabelValues("busy")) - busyBefore
	retries := counterValue(srv.m.SnapshotRetries.WithLabelValues(RetryBusy))
	t.Logf("%d subscribers joined %d threads; pipeline busy replies %v, hub retries %v, gave up %v",
		joined.Load(), threads, busy, retries, counterValue(srv.m.Snapshots.WithLabelValues("gave_up")))
	if got := joined.Load(); got != int64(threads*perThread) {
		t.Fatalf("joined %d of %d", got, threads*perThread)
	}
	if busy == 0 || retries == 0 {
		t.Errorf("the storm never hit the bounded queue (busy %v, retries %v): the test proves nothing", busy, retries)
	}
}

// busyPipeline answers snapshot requests for a thread as the pipeline does
// when its queue is full, the first n times (n < 0: always); then with a
// real reply.
func busyPipeline(t *testing.T, nc *nats.Conn, tenant, id string, n int) *atomic.Int64 {
	t.Helper()
	th := newTestThread(t, nc, tenant, id)
	_ = th.sub.Unsubscribe()
	var calls atomic.Int64
	subj := wire.SnapSubject(wire.Partition(tenant, th.token, wire.DefaultParts), tenant, th.token)
	sub, err := nc.Subscribe(subj, func(m *nats.Msg) {
		if c := calls.Add(1); n < 0 || c <= int64(n) {
			_ = m.RespondMsg(&nats.Msg{Header: nats.Header{wire.HeaderErrorKind: {wire.SnapErrBusy}, wire.HeaderError: {"snapshot queue full"}}})
			return
		}
		th.answer(m)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &calls
}

// TestSnapshotBusyRetry: busy replies are retried inside the hub (the
// client waits and joins); a pipeline busy past SnapshotRetry gets the
// client a 503 with Retry-After, counted as snapshot_busy.
func TestSnapshotBusyRetry(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	srv, node := newServer(t, connect(t, ns), func(c *Config) { c.Hub.SnapshotRetry = 500 * time.Millisecond })
	tok := token(t, "acme")
	for _, tt := range []struct {
		name       string
		busy       int
		wantStatus int
	}{
		{"busy-3-times", 3, http.StatusOK},
		{"busy-forever", -1, http.StatusServiceUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := busyPipeline(t, nc, "acme", tt.name, tt.busy)
			retriesBefore := counterValue(srv.m.SnapshotRetries.WithLabelValues(RetryBusy))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", node.URL+"/v1/threads/"+tt.name+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			retries := counterValue(srv.m.SnapshotRetries.WithLabelValues(RetryBusy)) - retriesBefore
			if tt.busy > 0 {
				if calls.Load() != int64(tt.busy)+1 || retries != float64(tt.busy) {
					t.Errorf("requests %d, retries %v; want %d, %d", calls.Load(), retries, tt.busy+1, tt.busy)
				}
				c := &sseClient{resp: resp, br: newBufReader(resp.Body), cancel: cancel}
				m, err := c.next()
				if err != nil || !strings.Contains(m.data, "RUN_STARTED") {
					t.Errorf("first message %+v, %v; want RUN_STARTED", m, err)
				}
				return
			}
			if ra := resp.Header.Get("Retry-After"); ra == "" {
				t.Error("503 without Retry-After")
			}
			if retries < 2 || counterValue(srv.m.Rejected.WithLabelValues("snapshot_busy")) < 1 {
				t.Errorf("retries %v, snapshot_busy rejections %v; want ≥ 2, ≥ 1", retries, counterValue(srv.m.Rejected.WithLabelValues("snapshot_busy")))
			}
			// The REST view is refused the same way.
			code, _ := do(t, "GET", node.URL+"/v1/threads/"+tt.name, tok, "", nil)
			if code != http.StatusServiceUnavailable {
				t.Errorf("REST view: status %d, want 503", code)
			}
		})
	}
}

// TestThreadListStatus: with the real pipeline, GET /v1/threads carries each
// thread's status and last activity from the summary stored with its
// checkpoint (a finished run, an open one), and only the token's tenant.
func TestThreadListStatus(t *testing.T) {
	ns := startNATS(t)
	const parts = 8
	startIngest(t, ns, parts)
	_, node := newServer(t, connect(t, ns), func(c *Config) { c.Hub.Partitions = parts })
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ts = 1767225600000 // 2026-01-01T00:00:00Z
	pub := func(tenant, thread string, evs ...string) {
		subj, _ := wire.EventSubject(tenant, thread)
		for _, ev := range evs {
			if _, err := js.Publish(ctx, subj, []byte(ev)); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub("acme", "done", `{"type":"RUN_STARTED","threadId":"done","runId":"r1","timestamp":1767225500000}`,
		fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":"done","runId":"r1","timestamp":%d}`, ts))
	pub("acme", "open", `{"type":"RUN_STARTED","threadId":"open","runId":"r1"}`)
	pub("other", "theirs", `{"type":"RUN_STARTED","threadId":"theirs","runId":"r1"}`)
	tok := token(t, "acme")
	var got map[string]ThreadInfo
	testsupport.WaitFor(t, 20*time.Second, "both threads checkpointed", func() bool {
		code, body := do(t, "GET", node.URL+"/v1/threads", tok, "", nil)
		var out struct{ Threads []ThreadInfo }
		if code != 200 || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("%d %s", code, body)
		}
		got = map[string]ThreadInfo{}
		for _, ti := range out.Threads {
			got[ti.Thread] = ti
		}
		return got["done"].Status == "finished" && got["open"].Status == "running"
	})
	if len(got) != 2 {
		t.Errorf("threads %v, want done and open only", got)
	}
	// Listings leave no consumer behind on the bucket's stream, not even
	// for a moment after the response.
	st, err := js.Stream(ctx, "KV_"+wire.DefaultViewsKV)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if code, body := do(t, "GET", node.URL+"/v1/threads", tok, "", nil); code != 200 {
			t.Fatalf("listing %d: %d %s", i, code, body)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Consumers != 0 {
			t.Fatalf("after listing %d: %d consumers left on the views stream", i, info.State.Consumers)
		}
	}
	done, open := got["done"], got["open"]
	if done.LastEvent == nil || !done.LastEvent.Equal(time.UnixMilli(ts)) || done.Seq == 0 {
		t.Errorf("done: %+v, want lastEvent %v (the event's timestamp) and a seq", done, time.UnixMilli(ts).UTC())
	}
	// No timestamp on the event: the time ingest applied it.
	if open.LastEvent == nil || time.Since(*open.LastEvent) > time.Minute || open.LastEvent.After(open.Updated.Add(time.Second)) {
		t.Errorf("open: %+v, want lastEvent about now, not after its checkpoint", open)
	}
}
