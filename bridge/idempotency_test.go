package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/bridge"
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/wire"
)

// idemNode is one "process": an embedded JetStream server on dir, the event
// stream and the bucket of first answers, a Publisher and the bridge
// behind a real HTTP server. stop tears it down as a crash would leave the
// store: whatever was stored stays on dir.
type idemNode struct {
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	pub  *agent.Publisher
	br   *bridge.Bridge
	http *httptest.Server
	env  *bridgeEnv // for post and stored
}

func startIdemNode(t testing.TB, dir string) *idemNode {
	t.Helper()
	scfg := natsembed.DefaultConfig()
	scfg.StoreDir = dir
	srv, err := natsembed.Start(scfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &idemNode{srv: srv}
	if n.nc, err = nats.Connect(srv.ClientURL()); err != nil {
		t.Fatal(err)
	}
	if n.js, err = jetstream.New(n.nc); err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.DefaultConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := pipeline.EnsureStreams(ctx, n.js, &cfg); err != nil {
		t.Fatal(err)
	}
	kv, err := bridge.EnsureIdempotencyBucket(ctx, n.js, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := bridge.IdempotencySecret(ctx, n.js, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n.pub, err = agent.New(n.nc, agent.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	n.br, err = bridge.New(bridge.Config{Publisher: n.pub, Verify: bridgeVerify,
		Idempotency: kv, IdempotencySecret: secret, IdempotencyWindow: cfg.Duplicates})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/ingest/", n.br)
	n.http = httptest.NewServer(mux)
	n.env = &bridgeEnv{js: n.js, pub: n.pub, br: n.br, http: n.http}
	t.Cleanup(n.stop)
	return n
}

// stop closes the HTTP server (cutting open requests), the publisher, the
// connection and the server. Idempotent.
func (n *idemNode) stop() {
	if n.srv == nil {
		return
	}
	n.http.CloseClientConnections()
	n.http.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.pub.Close(ctx)
	n.nc.Close()
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.srv = nil
}

// idemRun returns the JSONL body of one run of n content events on thread.
func idemRun(thread string, n int) (body []byte, events [][]byte) {
	add := func(s string) { events = append(events, []byte(s)) }
	add(`{"type":"RUN_STARTED","threadId":"` + thread + `","runId":"r1"}`)
	add(`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`)
	for i := range n {
		add(fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"part %d; "}`, i))
	}
	add(`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`)
	add(`{"type":"RUN_FINISHED","threadId":"` + thread + `","runId":"r1"}`)
	return append(bytes.Join(events, []byte("\n")), '\n'), events
}

// fold is the offline reduction (as `threadcast reduce` does) of events,
// numbered from 1.
func fold(t *testing.T, events [][]byte) map[string]any {
	t.Helper()
	th := reducer.NewThread("t")
	var dec codec.Decoder
	var ev codec.Event
	for i, raw := range events {
		seq := uint64(i + 1)
		if err := dec.Decode(bytes.Clone(raw), &ev); err != nil {
			th.Reject(seq, err)
			continue
		}
		th.Apply(seq, &ev)
	}
	var v map[string]any
	if err := json.Unmarshal(th.AppendView(nil), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// checkStoredOnce compares what the log holds for thread with the body's
// events: the same events, once each, in order, and the same offline fold.
func checkStoredOnce(t *testing.T, n *idemNode, thread string, events [][]byte) {
	t.Helper()
	got := n.env.stored(t)[thread]
	if len(got) != len(events) {
		t.Fatalf("%d events stored, want %d (each once)", len(got), len(events))
	}
	for i := range events {
		if !bytes.Equal(got[i], events[i]) {
			t.Fatalf("stored event %d is %s, want %s", i, got[i], events[i])
		}
	}
	if a, b := fold(t, got), fold(t, events); !reflect.DeepEqual(a, b) {
		t.Fatalf("fold of the stored events differs from the body's:\n%v\n%v", a, b)
	}
	if fold(t, got)["status"] == "rejected" {
		t.Fatalf("the thread ended rejected: %v", fold(t, got))
	}
}

// postKey posts body with the Idempotency-Key header.
func postKey(t *testing.T, n *idemNode, thread, key string, body []byte) (int, http.Header, bridge.Response) {
	t.Helper()
	u := n.http.URL + "/v1/ingest/acme/" + url.PathEscape(thread)
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", bridgeToken)
	req.Header.Set(bridge.HeaderIdempotencyKey, key)
	resp, err := n.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var br bridge.Response
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &br); err != nil {
		t.Fatalf("status %d, body %q: %v", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, resp.Header, br
}

// startCut sends the request head and the first part bytes of body,
// chunked, on a raw connection, and returns it open: the caller cuts it.
func startCut(t *testing.T, n *idemNode, thread, key string, part []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", n.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := bufio.NewWriter(c)
	fmt.Fprintf(w, "POST /v1/ingest/acme/%s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n%s: %s\r\nTransfer-Encoding: chunked\r\n\r\n",
		url.PathEscape(thread), bridgeToken, bridge.HeaderIdempotencyKey, key)
	fmt.Fprintf(w, "%x\r\n%s\r\n", len(part), part)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBridgeIdempotentRetryAfterCut cuts a keyed request's connection in
// the middle of its body, then retries the whole body with the same key:
// every event is stored exactly once, the thread ends as the body says
// (not rejected by a second RUN_FINISHED), and the answer counts the
// events the first attempt had stored as duplicates.
func TestBridgeIdempotentRetryAfterCut(t *testing.T) {
	n := startIdemNode(t, t.TempDir())
	body, events := idemRun("t-cut", 300)
	cut := bytes.Index(body, []byte(`"part 150; "`))
	cut = bytes.LastIndexByte(body[:cut], '\n') + 1 + 10 // inside event 152
	c := startCut(t, n, "t-cut", `"key-1"`, body[:cut])
	bridgeWaitFor(t, 10*time.Second, "the first part stored", func() bool { return len(n.env.stored(t)["t-cut"]) == 152 })
	c.Close()
	bridgeWaitFor(t, 10*time.Second, "the cut request to end", func() bool { return n.br.Stats().BadRequests == 1 })

	status, hdr, resp := postKey(t, n, "t-cut", `"key-1"`, body)
	if status != http.StatusOK || resp.Accepted != len(events) || resp.Duplicates != 152 || hdr.Get(bridge.HeaderIdempotentReplay) != "" {
		t.Fatalf("retry: status %d, %+v; want 200, %d accepted of which 152 duplicates", status, resp, len(events))
	}
	checkStoredOnce(t, n, "t-cut", events)

	// Once more: the answer is replayed and nothing is published.
	status2, hdr2, resp2 := postKey(t, n, "t-cut", `"key-1"`, body)
	if status2 != status || !reflect.DeepEqual(resp2, resp) || hdr2.Get(bridge.HeaderIdempotentReplay) != "true" {
		t.Fatalf("second retry: status %d %+v (replay %q); want the first answer %d %+v", status2, resp2, hdr2.Get(bridge.HeaderIdempotentReplay), status, resp)
	}
	checkStoredOnce(t, n, "t-cut", events)
	if st := n.br.Stats(); st.Replays != 1 || st.EventsDeduped != 152 {
		t.Errorf("stats %+v: want 1 replay and 152 deduplicated events", st)
	}
}

// TestBridgeIdempotentRetryAfterRestart stops the whole process (HTTP,
// publisher, NATS server) while a keyed request's body is half sent, starts
// a new one on the same data directory and retries there: each event is
// stored once. A completed request is then answered again after a second
// restart, from the bucket.
func TestBridgeIdempotentRetryAfterRestart(t *testing.T) {
	dir := t.TempDir()
	n := startIdemNode(t, dir)
	body, events := idemRun("t-restart", 300)
	half := bytes.Index(body, []byte(`"part 100; "`))
	half = bytes.LastIndexByte(body[:half], '\n') + 1 // events 0..101 whole
	startCut(t, n, "t-restart", "bare-key-2", body[:half])
	bridgeWaitFor(t, 10*time.Second, "the first part stored", func() bool { return len(n.env.stored(t)["t-restart"]) == 102 })
	n.stop()

	n = startIdemNode(t, dir)
	status, _, resp := postKey(t, n, "t-restart", "bare-key-2", body)
	if status != http.StatusOK || resp.Accepted != len(events) || resp.Duplicates != 102 {
		t.Fatalf("retry after restart: status %d, %+v; want 200, %d accepted of which 102 duplicates", status, resp, len(events))
	}
	checkStoredOnce(t, n, "t-restart", events)
	n.stop()

	n = startIdemNode(t, dir)
	status2, hdr2, resp2 := postKey(t, n, "t-restart", "bare-key-2", body)
	if status2 != status || !reflect.DeepEqual(resp2, resp) || hdr2.Get(bridge.HeaderIdempotentReplay) != "true" {
		t.Fatalf("retry after a second restart: %d %+v; want the first answer replayed", status2, resp2)
	}
	checkStoredOnce(t, n, "t-restart", events)
}

// TestBridgeIdempotencyErrors covers the key's refusals: another body with
// a used key (422), a key in flight (409, Retry-After), malformed keys and
// a bridge without a bucket (400), and keys scoped to their thread.
func TestBridgeIdempotencyErrors(t *testing.T) {
	n := startIdemNode(t, t.TempDir())
	body, events := idemRun("t-err", 5)
	if status, _, resp := postKey(t, n, "t-err", `"k"`, body); status != http.StatusOK || resp.Accepted != len(events) {
		t.Fatalf("first: %d %+v", status, resp)
	}
	other, _ := idemRun("t-err", 6)
	if status, _, resp := postKey(t, n, "t-err", `"k"`, other); status != http.StatusUnprocessableEntity || !strings.Contains(resp.Error, "different body") {
		t.Errorf("other body: %d %+v; want 422 naming the different body", status, resp)
	}
	// The same key on another thread is another key.
	other2, _ := idemRun("t-err-2", 6)
	if status, _, resp := postKey(t, n, "t-err-2", `"k"`, other2); status != http.StatusOK || resp.Duplicates != 0 {
		t.Errorf("same key, other thread: %d %+v; want 200 with no duplicates", status, resp)
	}
	checkStoredOnce(t, n, "t-err", events)

	for _, key := range []string{`"unterminated`, `"a\x01b"`, `"a"b"`, `"\q"`, `""`, "with space", `"` + strings.Repeat("x", 256) + `"`} {
		if status, _, resp := postKey(t, n, "t-err", key, body); status != http.StatusBadRequest || !strings.Contains(resp.Error, "Idempotency-Key") {
			t.Errorf("key %q: %d %+v; want 400 about the key", key, status, resp)
		}
	}

	// In flight: a request holding the key is still sending its body.
	busy, busyEvents := idemRun("t-busy", 5)
	c := startCut(t, n, "t-busy", `"busy"`, busy[:bytes.IndexByte(busy, '\n')+1])
	bridgeWaitFor(t, 10*time.Second, "the first event stored", func() bool { return len(n.env.stored(t)["t-busy"]) == 1 })
	status, hdr, resp := postKey(t, n, "t-busy", `"busy"`, busy)
	if status != http.StatusConflict || hdr.Get("Retry-After") == "" || !strings.Contains(resp.Error, "in flight") {
		t.Errorf("in flight: %d %v %+v; want 409 with Retry-After", status, hdr, resp)
	}
	c.Close()
	// 422, seven bad keys, then the cut request.
	bridgeWaitFor(t, 10*time.Second, "the cut request to end", func() bool { return n.br.Stats().BadRequests == 9 })
	if status, _, resp := postKey(t, n, "t-busy", `"busy"`, busy); status != http.StatusOK || resp.Duplicates != 1 {
		t.Errorf("after the cut: %d %+v; want 200 with the first event a duplicate", status, resp)
	}
	checkStoredOnce(t, n, "t-busy", busyEvents)
	if st := n.br.Stats(); st.KeyConflicts != 1 || st.KeyMismatches != 1 {
		t.Errorf("stats %+v: want 1 conflict and 1 mismatch", st)
	}

	// A bridge without a bucket cannot honour a key.
	env := startBridge(t, nil)
	req, _ := http.NewRequest(http.MethodPost, env.http.URL+"/v1/ingest/acme/t", bytes.NewReader(body))
	req.Header.Set("Authorization", bridgeToken)
	req.Header.Set(bridge.HeaderIdempotencyKey, `"k"`)
	res, err := env.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || env.storedCount(t) != 0 {
		t.Errorf("no bucket: %d with %d stored; want 400 and nothing stored", res.StatusCode, env.storedCount(t))
	}
}

// TestBridgeIdempotencyStoreDown: a key whose record cannot be read (the
// bucket is gone) is answered 503 with Retry-After before anything is
// published: without the record, the bridge cannot tell a retry.
func TestBridgeIdempotencyStoreDown(t *testing.T) {
	n := startIdemNode(t, t.TempDir())
	if err := n.js.DeleteKeyValue(context.Background(), bridge.DefaultIdempotencyBucket); err != nil {
		t.Fatal(err)
	}
	body, _ := idemRun("t-down", 3)
	status, hdr, resp := postKey(t, n, "t-down", `"k"`, body)
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(resp.Error, "idempotency record") {
		t.Fatalf("%d %v %+v; want 503 naming the idempotency record", status, hdr, resp)
	}
	if got := len(n.env.stored(t)["t-down"]); got != 0 {
		t.Errorf("%d events stored, want none", got)
	}
}

// TestBridgeIdempotencyKeyForms: the sf-string with its escapes and a bare
// token name the same key when they spell the same bytes.
func TestBridgeIdempotencyKeyForms(t *testing.T) {
	n := startIdemNode(t, t.TempDir())
	body, events := idemRun("t-forms", 2)
	if status, _, resp := postKey(t, n, "t-forms", `"a\"b\\c"`, body); status != http.StatusOK || resp.Accepted != len(events) {
		t.Fatalf("escaped sf-string: %d %+v", status, resp)
	}
	if status, hdr, _ := postKey(t, n, "t-forms", `"a\"b\\c"`, body); status != http.StatusOK || hdr.Get(bridge.HeaderIdempotentReplay) != "true" {
		t.Errorf("the same escaped key again: %d, replay %q", status, hdr.Get(bridge.HeaderIdempotentReplay))
	}
	if status, hdr, _ := postKey(t, n, "t-forms", `"plain-1"`, body); status != http.StatusOK || hdr.Get(bridge.HeaderIdempotentReplay) != "" {
		t.Fatalf("new key: %d", status)
	}
	if status, hdr, _ := postKey(t, n, "t-forms", `plain-1`, body); status != http.StatusOK || hdr.Get(bridge.HeaderIdempotentReplay) != "true" {
		t.Errorf("bare token of the same key: %d, replay %q", status, hdr.Get(bridge.HeaderIdempotentReplay))
	}
	if got := len(n.env.stored(t)["t-forms"]); got != 2*len(events) {
		t.Errorf("%d events stored, want %d (two keys, once each)", got, 2*len(events))
	}
	if n.br.IdempotencyMsgID("acme", "t", "k", 3) == n.br.IdempotencyMsgID("globex", "t", "k", 3) {
		t.Error("two tenants share a message id for the same key")
	}
}

// The Nats-Msg-Ids of a keyed request cannot be had from its tenant,
// thread and key alone: the event stream de-duplicates ids across every
// tenant, so another tenant publishing first with ids it could compute
// would have this tenant's events dropped as duplicates. Here globex
// publishes, on its own thread, with the ids an unkeyed hash of (acme,
// thread, key) gives; acme's keyed request is stored whole all the same,
// and its retry is still answered from the first.
func TestBridgeIdempotencyIDsAreKeyed(t *testing.T) {
	n := startIdemNode(t, t.TempDir())
	body, events := idemRun("t-pre", 3)
	const key = "order-42"
	h := sha256.New()
	for _, s := range []string{"acme", "t-pre", key} {
		h.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
	}
	guess := hex.EncodeToString(h.Sum(nil)[:20])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subj, _ := wire.EventSubject("globex", "g")
	for i := range events {
		id := "tc-idem." + guess + "." + strconv.Itoa(i)
		if id == n.br.IdempotencyMsgID("acme", "t-pre", key, i) {
			t.Fatalf("event %d's id is the unkeyed hash of its tenant, thread and key", i)
		}
		if _, err := n.js.Publish(ctx, subj, []byte(`{"type":"RUN_STARTED","threadId":"g","runId":"r"}`), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	if status, _, resp := postKey(t, n, "t-pre", key, body); status != http.StatusOK || resp.Accepted != len(events) {
		t.Fatalf("acme's keyed request: %d %+v", status, resp)
	}
	if got := len(n.env.stored(t)["t-pre"]); got != len(events) {
		t.Errorf("%d of acme's %d events stored", got, len(events))
	}
	if status, hdr, _ := postKey(t, n, "t-pre", key, body); status != http.StatusOK || hdr.Get(bridge.HeaderIdempotentReplay) != "true" {
		t.Errorf("the retry: %d, replay %q", status, hdr.Get(bridge.HeaderIdempotentReplay))
	}

	// The secret is the deployment's: asked again, the same; a bridge
	// without one refuses an idempotency bucket.
	cfg := pipeline.DefaultConfig()
	a, err := bridge.IdempotencySecret(ctx, n.js, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.IdempotencySecret(ctx, n.js, &cfg)
	if err != nil || !bytes.Equal(a, b) || len(a) < bridge.MinIdempotencySecret {
		t.Errorf("the secret asked twice: %x, %x, %v", a, b, err)
	}
	kv, err := bridge.EnsureIdempotencyBucket(ctx, n.js, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bridge.New(bridge.Config{Publisher: n.pub, Verify: bridgeVerify, Idempotency: kv, IdempotencySecret: a[:8]}); !errors.Is(err, pipeline.ErrConfig) {
		t.Errorf("a short secret: %v, want ErrConfig", err)
	}
}
