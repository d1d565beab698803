package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/bridge"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// bridgeEnv is an embedded JetStream server with the event stream, a
// Publisher and the bridge behind a real HTTP server.
type bridgeEnv struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	pub  *agent.Publisher
	br   *bridge.Bridge
	http *httptest.Server
}

const bridgeToken = "Bearer let-me-in"

// bridgeVerify accepts bridgeToken for any tenant but "other", for which it
// answers forbidden.
func bridgeVerify(r *http.Request, tenant string) error {
	if r.Header.Get("Authorization") != bridgeToken {
		return errors.New("bad token")
	}
	if tenant == "other" {
		return bridge.ErrForbidden
	}
	return nil
}

func startBridge(t *testing.T, mod func(*bridge.Config)) *bridgeEnv {
	return startBridgeTB(t, mod)
}

func startBridgeB(b *testing.B) *bridgeEnv { return startBridgeTB(b, nil) }

func startBridgeTB(t testing.TB, mod func(*bridge.Config)) *bridgeEnv {
	t.Helper()
	scfg := natsembed.DefaultConfig()
	scfg.StoreDir = t.TempDir()
	srv, err := natsembed.Start(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.DefaultConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, pipeline.StreamConfig(&cfg)); err != nil {
		t.Fatal(err)
	}
	pub, err := agent.New(nc, agent.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := pub.Close(ctx); err != nil {
			t.Errorf("publisher Close: %v", err)
		}
	})
	bcfg := bridge.Config{Publisher: pub, Verify: bridgeVerify}
	if mod != nil {
		mod(&bcfg)
	}
	br, err := bridge.New(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/ingest/", br) // mounted as cmd/* would
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close) // registered last: runs first, before the publisher closes
	return &bridgeEnv{nc: nc, js: js, pub: pub, br: br, http: hs}
}

// post sends body to the bridge for tenant/thread (path-escaped here).
func (e *bridgeEnv) post(t *testing.T, tenant, thread, contentType string, body io.Reader) (int, http.Header, bridge.Response) {
	t.Helper()
	u := e.http.URL + "/v1/ingest/" + tenant + "/" + url.PathEscape(thread)
	req, err := http.NewRequest(http.MethodPost, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", bridgeToken)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.http.Client().Do(req)
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

// stored returns the events stored per decoded thread id, in stream order.
func (e *bridgeEnv) stored(t *testing.T) map[string][][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, wire.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][][]byte{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		_, _, tok, err := wire.ParseStoredSubject(m.Subject)
		if err != nil {
			t.Fatal(err)
		}
		id, err := wire.DecodeThread(tok)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = append(out[id], bytes.Split(m.Data, []byte("\n"))...)
	}
	return out
}

func (e *bridgeEnv) storedCount(t *testing.T) int {
	n := 0
	for _, evs := range e.stored(t) {
		n += len(evs)
	}
	return n
}

// bridgeWaitFor is testsupport.WaitFor.
func bridgeWaitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testsupport.WaitFor(t, timeout, what, cond)
}

// bridgeCase loads the events of one conformance case.
func bridgeCase(t *testing.T, name string) []json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testsupport.ConformanceDir(t), "cases", name))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.Events
}

func compact(t *testing.T, ev []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, ev); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sameJSON(t *testing.T, a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		t.Fatalf("not JSON: %s / %s", a, b)
	}
	return reflect.DeepEqual(x, y)
}

// TestBridgeFormats posts a conformance stream as JSONL, as a JSON array and
// as SSE, to a thread id that needs encoding, and finds it stored intact.
func TestBridgeFormats(t *testing.T) {
	events := bridgeCase(t, "activity--snapshot-then-deltas.json")
	var jsonl, sse bytes.Buffer
	for _, ev := range events {
		jsonl.Write(compact(t, ev))
		jsonl.WriteByte('\n')
		sse.WriteString("id: 1\ndata: ")
		sse.Write(compact(t, ev))
		sse.WriteString("\n\n")
	}
	array, _ := json.MarshalIndent(events, "", "  ")
	tests := []struct {
		name, contentType string
		body              []byte
	}{
		{"jsonl", "application/x-ndjson", jsonl.Bytes()},
		{"array", "application/json", array},
		{"sse", "text/event-stream", sse.Bytes()},
		{"jsonl without content type", "", jsonl.Bytes()},
	}
	env := startBridge(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			thread := "run/" + tt.name + " ünï.*>"
			body := threadIDMember.ReplaceAll(tt.body, append([]byte(`"threadId"$1:$2`), bytes.ReplaceAll(mustJSON(thread), []byte("$"), []byte("$$"))...))
			events := withThread(events, thread)
			status, _, resp := env.post(t, "acme", thread, tt.contentType, bytes.NewReader(body))
			if status != http.StatusOK || resp.Accepted != len(events) || resp.Events != len(events) || resp.RejectedCount != 0 {
				t.Fatalf("status %d, %+v; want 200 with %d accepted", status, resp, len(events))
			}
			got := env.stored(t)[thread]
			if len(got) != len(events) {
				t.Fatalf("%d events stored for %q, want %d", len(got), thread, len(events))
			}
			for i := range events {
				if !sameJSON(t, got[i], events[i]) {
					t.Errorf("event %d stored as %s, want %s", i, got[i], events[i])
				}
			}
		})
	}
}

// TestBridgeStreamsSSE relays an SSE response while it is still being
// written (a chunked body with no end in sight): the first events must be in
// the stream before the body ends.
func TestBridgeStreamsSSE(t *testing.T) {
	env := startBridge(t, nil)
	events := withThread(bridgeCase(t, "activity--snapshot-then-deltas.json"), "live")
	pr, pw := io.Pipe()
	type result struct {
		status int
		resp   bridge.Response
	}
	done := make(chan result, 1)
	go func() {
		// Not env.post: t.Fatal must not be called from this goroutine.
		var r result
		req, _ := http.NewRequest(http.MethodPost, env.http.URL+"/v1/ingest/acme/live", pr)
		req.Header.Set("Authorization", bridgeToken)
		req.Header.Set("Content-Type", "text/event-stream")
		resp, err := env.http.Client().Do(req)
		if err == nil {
			r.status = resp.StatusCode
			_ = json.NewDecoder(resp.Body).Decode(&r.resp)
			resp.Body.Close()
		}
		done <- r
	}()
	write := func(ev json.RawMessage) {
		if _, err := pw.Write([]byte("data: " + string(compact(t, ev)) + "\n\n")); err != nil {
			t.Fatal(err)
		}
	}
	write(events[0])
	write(events[1])
	bridgeWaitFor(t, 10*time.Second, "the first two events in the stream while the body is open",
		func() bool { return env.storedCount(t) == 2 })
	for _, ev := range events[2:] {
		write(ev)
	}
	if _, err := pw.Write([]byte(": keep-alive\n\n")); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	r := <-done
	if r.status != http.StatusOK || r.resp.Accepted != len(events) || r.resp.Format != "sse" {
		t.Fatalf("status %d, %+v", r.status, r.resp)
	}
	if n := len(env.stored(t)["live"]); n != len(events) {
		t.Errorf("%d events stored, want %d", n, len(events))
	}
}

// TestBridgeErrors covers every non-200 answer and the partial successes.
func TestBridgeErrors(t *testing.T) {
	good := func(i int) string {
		return `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strconv.Itoa(i) + `"}`
	}
	tests := []struct {
		name         string
		method       string // default POST
		path         string // default /v1/ingest/acme/t
		auth         string // default bridgeToken; "-" for none
		contentType  string
		body         string
		chunked      bool // send without Content-Length
		wantStatus   int
		wantAccepted int
		wantRejected []int
		wantStored   int
		wantErr      string // substring of the answer's error
	}{
		{name: "valid and invalid events", body: good(0) + "\n" + `{"type":"NOPE"}` + "\n" + good(1) + "\n" + `{"type":"TEXT_MESSAGE_CONTENT"}`,
			wantStatus: 200, wantAccepted: 2, wantRejected: []int{1, 3}, wantStored: 2},
		{name: "only invalid events", body: `{"type":"NOPE"}` + "\n" + `{"type":"TEXT_MESSAGE_CONTENT"}`,
			wantStatus: 422, wantRejected: []int{0, 1}},
		{name: "empty body", body: "", wantStatus: 400, wantErr: "the body holds no event: the body is empty"},
		{name: "body that is not JSON", body: "not json at all\n", wantStatus: 400,
			wantErr: `read as SSE (it starts with neither '{' nor '['), no line is an SSE "data:" field; the body starts with "not json at all\n"`},
		{name: "empty array", body: " [ ] ", wantStatus: 400, wantErr: `read as a JSON array (it starts with '['), which is empty; the body starts with " [ ] "`},
		{name: "whitespace only", body: " \n\t\n", wantStatus: 400, wantErr: "the body holds no event: the body starts with \" \\n\\t\\n\" or only whitespace"},
		{name: "JSONL broken after an event", body: good(0) + "\n{", wantStatus: 400, wantAccepted: 1, wantStored: 1,
			wantErr: `bridge: body read as JSONL (it starts with '{'): codec: `},
		{name: "bad framing after good events", body: good(0) + "\n" + good(1) + "\n" + `]`,
			wantStatus: 400, wantAccepted: 2, wantStored: 2, wantErr: "codec"},
		{name: "missing auth", auth: "-", body: good(0), wantStatus: 401, wantErr: "bad token"},
		{name: "wrong tenant for the token", path: "/v1/ingest/other/t", body: good(0), wantStatus: 403, wantErr: "forbidden"},
		{name: "bad tenant", path: "/v1/ingest/ACME/t", body: good(0), wantStatus: 400, wantErr: "tenant"},
		{name: "empty thread", path: "/v1/ingest/acme/", body: good(0), wantStatus: 400, wantErr: "thread"},
		{name: "event names another thread", body: `{"type":"RUN_STARTED","threadId":"t","runId":"r"}` + "\n" + `{"type":"RUN_FINISHED","threadId":"other","runId":"r"}`,
			wantStatus: 200, wantAccepted: 1, wantRejected: []int{1}, wantStored: 1},
		{name: "thread not UTF-8", path: "/v1/ingest/acme/%FF%FE", body: good(0), wantStatus: 400, wantErr: "not valid UTF-8"},
		{name: "thread too long", path: "/v1/ingest/acme/" + strings.Repeat("x", 1025), body: good(0), wantStatus: 400, wantErr: "too long"},
		{name: "unsupported content type", contentType: "application/xml", body: good(0), wantStatus: 415, wantErr: "Content-Type"},
		{name: "declared body over the limit", body: good(0) + "\n" + good(1) + "\n" + good(2), wantStatus: 413, wantErr: "limit"},
		{name: "chunked body over the limit", chunked: true, body: good(0) + "\n" + good(1) + "\n" + good(2) + "\n" + good(3),
			wantStatus: 413, wantAccepted: 2, wantStored: 2},
		{name: "event over the event limit", body: good(0) + "\n" + `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat("x", 100) + `"}`,
			wantStatus: 413, wantAccepted: 1, wantStored: 1, wantErr: "larger than the largest event accepted, 100 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := startBridge(t, func(c *bridge.Config) {
				c.MaxEventBytes = 100
				if strings.Contains(tt.name, "over the limit") {
					c.MaxBodyBytes = int64(2*len(good(0)) + 10) // two events and a bit
				}
			})
			path := tt.path
			if path == "" {
				path = "/v1/ingest/acme/t"
			}
			var body io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			req, err := http.NewRequest(http.MethodPost, env.http.URL+path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth != "-" {
				req.Header.Set("Authorization", bridgeToken)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			resp, err := env.http.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got bridge.Response
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			var idx []int
			for _, r := range got.Rejected {
				idx = append(idx, r.Index)
				if r.Reason == "" {
					t.Errorf("rejection %d without a reason", r.Index)
				}
			}
			if resp.StatusCode != tt.wantStatus || got.Accepted != tt.wantAccepted || !reflect.DeepEqual(idx, tt.wantRejected) ||
				!strings.Contains(got.Error, tt.wantErr) {
				t.Errorf("status %d %+v; want %d, %d accepted, rejected %v, error containing %q",
					resp.StatusCode, got, tt.wantStatus, tt.wantAccepted, tt.wantRejected, tt.wantErr)
			}
			if tt.wantStatus == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if n := env.storedCount(t); n != tt.wantStored {
				t.Errorf("%d events stored, want %d", n, tt.wantStored)
			}
		})
	}
}

// TestBridgeRouting: only POST on the ingest path.
func TestBridgeRouting(t *testing.T) {
	env := startBridge(t, nil)
	resp, err := env.http.Client().Get(env.http.URL + "/v1/ingest/acme/t")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
}

// TestBridgeStats: the counters follow the answers.
func TestBridgeStats(t *testing.T) {
	env := startBridge(t, nil)
	ok := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`
	env.post(t, "acme", "t", "", strings.NewReader(ok+"\n"+`{"type":"NOPE"}`))
	env.post(t, "acme", "t", "", strings.NewReader(`{"type":"NOPE"}`))
	env.post(t, "other", "t", "", strings.NewReader(ok))
	want := bridge.Stats{Requests: 3, AuthFailures: 1, BadRequests: 1, EventsAccepted: 1, EventsRejected: 2}
	if got := env.br.Stats(); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	if n := len(env.br.Collectors()); n != 15 {
		t.Errorf("%d collectors", n)
	}
}

// TestNewBridgeNeedsPublisherAndVerify: no silent open door.
func TestNewBridgeNeedsPublisherAndVerify(t *testing.T) {
	if _, err := bridge.New(bridge.Config{Verify: bridge.VerifyAll}); !errors.Is(err, pipeline.ErrConfig) {
		t.Errorf("without a publisher: %v", err)
	}
	if _, err := bridge.New(bridge.Config{Publisher: &agent.Publisher{}}); !errors.Is(err, pipeline.ErrConfig) {
		t.Errorf("without a verifier: %v", err)
	}
}

// TestBridgeNoGoroutineLeak: after the HTTP server, the publisher, the
// connection and the NATS server stop, nothing is left.
func TestBridgeNoGoroutineLeak(t *testing.T) {
	base := testsupport.CountGoroutines()
	t.Run("run", func(t *testing.T) {
		env := startBridge(t, nil)
		env.post(t, "acme", "t", "", strings.NewReader(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`))
	})
	base.Exited(t)
}

// TestBridgeEventSizes: with the defaults (an embedded server and a stream
// of 8 MiB messages), a single 5 MB event is accepted and stored whole; one
// over the largest event accepted is refused with 413 and a body naming
// the limit, and nothing of it is stored.
func TestBridgeEventSizes(t *testing.T) {
	env := startBridge(t, nil)
	post := func(event string) (int, bridge.Response) {
		req, _ := http.NewRequest(http.MethodPost, env.http.URL+"/v1/ingest/acme/sizes", strings.NewReader(event))
		req.Header.Set("Authorization", bridgeToken)
		resp, err := env.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got bridge.Response
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, got
	}
	five := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat("5", 5<<20) + `"}`
	if code, got := post(five); code != http.StatusOK || got.Accepted != 1 {
		t.Fatalf("5 MB event: %d %+v", code, got)
	}
	stored := env.stored(t)["sizes"]
	if len(stored) != 1 || len(stored[0]) != len(five) {
		t.Fatalf("stored %d events", len(stored))
	}
	max := pipeline.DefaultMaxMsgSize - pipeline.EventHeaderRoom
	over := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat("9", max) + `"}`
	code, got := post(over)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(got.Error, "larger than the largest event accepted, "+strconv.Itoa(max)+" bytes") {
		t.Fatalf("oversized event: %d %q", code, got.Error)
	}
	if n := env.storedCount(t); n != 1 {
		t.Errorf("%d events stored, want 1", n)
	}
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

func mustJSON(v string) []byte {
	b, _ := json.Marshal(v)
	return b
}
