package fanout

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/wire"
)

func do(t *testing.T, method, u, tok string, body string, hdr http.Header) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Streams never end by themselves: read what arrives within the deadline.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}

// Every endpoint refuses missing and invalid tokens with 401, and threads
// outside the token's patterns, or a token without the read scope, with
// 403, before touching any thread.
func TestAuthEveryEndpoint(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "t1")
	th.publish(t, "secret;")
	_, hs := newServer(t, nc, nil)

	expired, _ := auth.Mint(testKey, auth.Claims{Tenant: "acme", Expiry: time.Now().Add(-time.Minute).Unix()})
	otherKey, _ := auth.Mint([]byte("some-other-key-0123456789"), auth.Claims{Tenant: "acme", Expiry: time.Now().Add(time.Hour).Unix()})
	badTenant, _ := auth.Mint(testKey, auth.Claims{Tenant: "ACME.*", Expiry: time.Now().Add(time.Hour).Unix()})
	onlyT2 := token(t, "acme", "t2")
	publishOnly, _ := auth.Mint(testKey, auth.Claims{Tenant: "acme", Scope: auth.ScopePublish, Expiry: time.Now().Add(time.Hour).Unix()})
	endpoints := []struct {
		method, path, body string
		threadScoped       bool
	}{
		{"GET", "/v1/threads/t1/events", "", true},
		{"GET", "/v1/threads/t1/events?mode=view", "", true},
		{"POST", "/v1/threads/t1/events", `{"threadId":"t1","runId":"r9","messages":[]}`, true},
		{"GET", "/v1/threads/t1", "", true},
		{"GET", "/v1/threads", "", false},
		{"GET", "/v1/tap", "", false},
	}
	tests := []struct {
		name string
		tok  string
		want int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"garbage", "abc.def.ghi", http.StatusUnauthorized},
		{"expired", expired, http.StatusUnauthorized},
		{"other key", otherKey, http.StatusUnauthorized},
		{"tenant that cannot be a subject token", badTenant, http.StatusUnauthorized},
		{"thread not in token", onlyT2, http.StatusForbidden},
		{"publish scope without read", publishOnly, http.StatusForbidden},
	}
	for _, ep := range endpoints {
		for _, tt := range tests {
			if tt.tok == onlyT2 && !ep.threadScoped {
				continue
			}
			t.Run(ep.method+" "+ep.path+"/"+tt.name, func(t *testing.T) {
				code, body := do(t, ep.method, hs.URL+ep.path, tt.tok, ep.body, nil)
				if code != tt.want {
					t.Fatalf("status %d, want %d (%s)", code, tt.want, body)
				}
				if strings.Contains(body, "secret") {
					t.Fatalf("leaked thread content: %s", body)
				}
			})
		}
	}
	// The query parameter works where EventSource cannot set a header.
	c := openSSE(t, hs.URL+"/v1/threads/t1/events?access_token="+url.QueryEscape(token(t, "acme", "t*")), "", nil)
	var a aguiModel
	a.follow(t, c, th.Text, 5*time.Second)
}

// A token of tenant B reading the same thread id reads B's thread, never
// A's: the tenant comes from the token, not from anything in the URL.
func TestTenantIsolation(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	pub := connect(t, ns)
	ta := newTestThread(t, pub, "tenant-a", "t1")
	tb := newTestThread(t, pub, "tenant-b", "t1")
	ta.publish(t, "secret-of-a;")
	tb.publish(t, "public-of-b;")
	_, hs := newServer(t, nc, nil)
	tokB := token(t, "tenant-b")

	c := openSSE(t, hs.URL+"/v1/threads/t1/events", tokB, nil)
	var a aguiModel
	a.follow(t, c, tb.Text, 5*time.Second)
	ta.publish(t, "more-secret;")
	tb.publish(t, "more-b;")
	a.follow(t, c, tb.Text, 5*time.Second)
	if strings.Contains(a.text, "secret") {
		t.Fatalf("tenant B read tenant A: %q", a.text)
	}
	code, body := do(t, "GET", hs.URL+"/v1/threads/t1", tokB, "", nil)
	if code != 200 || strings.Contains(body, "secret") || !strings.Contains(body, "public-of-b") {
		t.Fatalf("REST view for B: %d %s", code, body)
	}
	// A thread that exists only in tenant A does not exist for B (no
	// responder answers tenant-b's subject for it).
	ta2 := newTestThread(t, pub, "tenant-a", "only-a")
	ta2.publish(t, "secret;")
	code, body = do(t, "GET", hs.URL+"/v1/threads/only-a", tokB, "", nil)
	if code == 200 || strings.Contains(body, "secret") {
		t.Fatalf("B read A's thread: %d %s", code, body)
	}
}

// Thread ids are opaque: NATS wildcards and separators in them name a thread
// of their own (an escaped subject token), never other threads.
func TestHostileThreadIDs(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	pub := connect(t, ns)
	t1 := newTestThread(t, pub, "acme", "t1")
	t1.publish(t, "secret;")
	_, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	for _, id := range []string{"*", ">", "t1.>", "a.b", "..", " ", "t1 ", "é", "a/b", "=dDE"} {
		t.Run(id, func(t *testing.T) {
			own := newTestThread(t, pub, "acme", id)
			own.publish(t, "own;")
			esc := strings.ReplaceAll(url.PathEscape(id), ".", "%2E") // keep ".." from being cleaned away by the client
			c := openSSE(t, hs.URL+"/v1/threads/"+esc+"/events", tok, nil)
			var a aguiModel
			a.follow(t, c, own.Text, 5*time.Second)
			t1.publish(t, "secret2;")
			own.publish(t, "own2;")
			a.follow(t, c, own.Text, 5*time.Second)
			code, body := do(t, "GET", hs.URL+"/v1/threads/"+esc, tok, "", nil)
			if code != 200 || strings.Contains(body, "secret") {
				t.Fatalf("REST: %d %s", code, body)
			}
		})
	}
	for _, tt := range []struct {
		name, path string
		want       int
	}{
		{"too long", "/v1/threads/" + strings.Repeat("x", wire.MaxThreadIDLen+1) + "/events", http.StatusBadRequest},
		{"invalid utf-8", "/v1/threads/%FF%FE/events", http.StatusBadRequest},
		{"bad mode", "/v1/threads/t1/events?mode=raw", http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if code, body := do(t, "GET", hs.URL+tt.path, tok, "", nil); code != tt.want {
				t.Fatalf("status %d, want %d: %s", code, tt.want, body)
			}
		})
	}
}

func TestRunInputPOST(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "t1")
	th.publish(t, "a;")
	_, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	for _, tt := range []struct {
		name, body string
		want       int
	}{
		{"not json", "{", http.StatusBadRequest},
		{"not an object", "[1]", http.StatusBadRequest},
		{"other thread", `{"threadId":"t2"}`, http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if code, body := do(t, "POST", hs.URL+"/v1/threads/t1/events", tok, tt.body, nil); code != tt.want {
				t.Fatalf("status %d, want %d: %s", code, tt.want, body)
			}
		})
	}
	// A POSTed stream (an AG-UI HttpAgent) ends once no run is open and
	// everything was written: here when the run the snapshot opened
	// finishes.
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(100 * time.Millisecond)
		th.publishEvents(t, `{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}`)
	}()
	start := time.Now()
	code, body := do(t, "POST", hs.URL+"/v1/threads/t1/events", tok, `{"threadId":"t1","runId":"r2","messages":[],"tools":[],"context":[],"state":{}}`,
		http.Header{"Accept": {"text/event-stream"}, "Content-Type": {"application/json"}})
	<-done
	if code != 200 || !strings.Contains(body, `"MESSAGES_SNAPSHOT"`) || !strings.HasSuffix(body, "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t1\",\"runId\":\"r1\"}\n\n") {
		t.Fatalf("POST stream: %d %q", code, body)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("POST stream did not end when the run finished (%v)", time.Since(start))
	}
}

// TestPOSTResumeInsideRun: a POSTed agui stream (an AG-UI HttpAgent) that
// resumes from a cursor inside an open run stays open until the run
// finishes, then ends. The run started before the cursor, on an earlier
// stream: the replay after it has no run event, and the stream must not
// take that for "no run open". Both for a cursor at a frame's end and for
// one inside a frame ("<seq>.<i>").
func TestPOSTResumeInsideRun(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	_, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	for _, tt := range []struct {
		name   string
		cursor func(seq uint64) string // of the frame publishing "b;", "c;"
		held   string                  // the text the client has at the cursor
	}{
		{"frame", func(seq uint64) string { return strconv.FormatUint(seq, 10) }, "a;b;c;"},
		{"inside a frame", func(seq uint64) string { return strconv.FormatUint(seq, 10) + ".0" }, "a;b;"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := strings.ReplaceAll(tt.name, " ", "-")
			th := newTestThread(t, connect(t, ns), "acme", id)
			th.publish(t, "a;")
			u := hs.URL + "/v1/threads/" + id + "/events"
			// A GET subscriber keeps the feed (and its ring) on the node.
			g := openSSE(t, u, tok, nil)
			defer g.close()
			var gm aguiModel
			gm.follow(t, g, th.Text, 2*time.Second) // its snapshot: run r1 is open
			cur := th.publish(t, "b;", "c;")
			th.publish(t, "d;")
			gm.follow(t, g, th.Text, 2*time.Second)

			req, _ := http.NewRequest("POST", u+"?after="+tt.cursor(cur), strings.NewReader(`{"threadId":"`+id+`","runId":"r2","messages":[]}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Accept", "text/event-stream")
			ss, status := testsupport.OpenSSE(t, req)
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			c := &sseClient{resp: ss.Resp, br: ss.BR, cancel: ss.Cancel}
			defer c.close()
			m := aguiModel{text: tt.held}
			m.follow(t, c, th.Text, 2*time.Second) // the stream would end here if it took r1 for closed
			th.publishEvents(t, `{"type":"RUN_FINISHED","threadId":"`+id+`","runId":"r1"}`)
			timer := time.AfterFunc(2*time.Second, c.cancel)
			defer timer.Stop()
			for {
				msg, err := c.next()
				if err != nil {
					t.Fatalf("the stream resumed inside run r1 ended before the run finished (%v)", err)
				}
				if strings.Contains(msg.data, `"RUN_FINISHED"`) {
					break
				}
			}
			if msg, err := c.next(); err != io.EOF {
				t.Fatalf("after the run finished, the stream went on: %+v %v", msg, err)
			}
		})
	}
}

// TestPOSTResumeRunFromLaterSnapshot: the feed's first frame came before
// its first snapshot (a busy thread), so the feed saw no run event of its
// own; the snapshot it then continues from says no run is open. A POSTed
// stream resuming after that snapshot ends once it has written the frames
// after its cursor, as an HttpAgent expects when no run is open.
func TestPOSTResumeRunFromLaterSnapshot(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "late")
	th.finished = true
	th.publish(t, "a;")
	srv, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	// The first snapshot request is answered once the feed has a frame
	// published after it was asked.
	_ = th.sub.Unsubscribe()
	var first sync.Once
	sub, err := th.nc.Subscribe(th.sub.Subject, func(m *nats.Msg) {
		first.Do(func() {
			seq := th.publish(t, "b;")
			f := srv.hub.lookup("acme", "late")
			for {
				f.mu.Lock()
				if f.known && f.hi >= seq {
					f.mu.Unlock()
					break
				}
				if f.advanced == nil {
					f.advanced = make(chan struct{})
				}
				advanced := f.advanced
				f.mu.Unlock()
				<-advanced
			}
		})
		th.answer(m)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	u := hs.URL + "/v1/threads/late/events"
	// A GET subscriber keeps the feed (and its ring) on the node.
	g := openSSE(t, u, tok, nil)
	defer g.close()
	var gm aguiModel
	gm.follow(t, g, th.Text, 2*time.Second)
	cur := th.publish(t, "c;")
	th.publish(t, "d;")
	gm.follow(t, g, th.Text, 2*time.Second)

	req, _ := http.NewRequest("POST", u+"?after="+strconv.FormatUint(cur, 10), strings.NewReader(`{"threadId":"late","runId":"r2","messages":[]}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	ss, status := testsupport.OpenSSE(t, req)
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	c := &sseClient{resp: ss.Resp, br: ss.BR, cancel: ss.Cancel}
	defer c.close()
	m := aguiModel{text: "a;b;c;"}
	m.follow(t, c, th.Text, 2*time.Second)
	timer := time.AfterFunc(2*time.Second, c.cancel)
	defer timer.Stop()
	if msg, err := c.next(); err != io.EOF {
		t.Fatalf("with no run open and everything written, the stream went on: %+v %v", msg, err)
	}
}

func TestViewModeSSE(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "v1")
	th.publish(t, "a;")
	_, hs := newServer(t, nc, nil)
	c := openSSE(t, hs.URL+"/v1/threads/v1/events?mode=view", token(t, "acme"), nil)
	th.publish(t, "b;", "c;")
	th.publish(t, "d;")
	type msg struct {
		Type    string          `json:"type"`
		Seq     uint64          `json:"seq"`
		Prev    uint64          `json:"prev"`
		View    json.RawMessage `json:"view"`
		Changes struct {
			Append string `json:"append"`
		} `json:"changes"`
	}
	var got []msg
	for len(got) < 3 {
		m, err := c.next()
		if err != nil {
			t.Fatal(err)
		}
		if m.data == "" {
			continue
		}
		var v msg
		if err := json.Unmarshal([]byte(m.data), &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if got[0].Type != "view" || got[0].Seq != 2 || !strings.Contains(string(got[0].View), `"a;"`) {
		t.Fatalf("first message %+v", got[0])
	}
	if got[1].Type != "changes" || got[1].Prev != 2 || got[1].Seq != 5 || got[1].Changes.Append != "b;c;" {
		t.Fatalf("second message %+v", got[1])
	}
	if got[2].Prev != 5 || got[2].Seq != 7 || c.lastID != "7" {
		t.Fatalf("third message %+v, id %q", got[2], c.lastID)
	}
}

func TestWebSocket(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "w1")
	th.publish(t, "a;")
	_, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(hs.URL, "http")

	_, resp, err := websocket.Dial(ctx, wsURL+"/v1/threads/w1/events", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dial without token: %v %v", err, resp)
	}

	c, _, err := websocket.Dial(ctx, wsURL+"/v1/threads/w1/events", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var a aguiModel
	th.publish(t, "b;", "c;")
	for a.text != th.Text() {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		a.apply(t, string(data))
	}
	if a.snapshots != 1 {
		t.Fatalf("snapshots %d", a.snapshots)
	}

	v, _, err := websocket.Dial(ctx, wsURL+"/v1/threads/w1/events?mode=view&access_token="+tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.CloseNow()
	// The node's cached snapshot (seq 2) plus the ring's frame 5: exactly
	// the view at 5, without asking the pipeline again.
	_, data, err := v.Read(ctx)
	if err != nil || !strings.HasPrefix(string(data), `{"type":"view","seq":2,`) {
		t.Fatalf("view ws first message %q %v", data, err)
	}
	_, data, err = v.Read(ctx)
	if err != nil || string(data) != `{"type":"changes","seq":5,"prev":2,"changes":{"append":"b;c;"}}` {
		t.Fatalf("view ws replayed change %q %v", data, err)
	}
	th.publish(t, "d;")
	_, data, err = v.Read(ctx)
	if err != nil || string(data) != `{"type":"changes","seq":7,"prev":5,"changes":{"append":"d;"}}` {
		t.Fatalf("view ws change %q %v", data, err)
	}
}

func TestRESTView(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "t1")
	_, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	if code, _ := do(t, "GET", hs.URL+"/v1/threads/t1", tok, "", nil); code != http.StatusNotFound {
		t.Fatalf("never-seen thread: %d, want 404", code)
	}
	th.publish(t, "a;")
	code, body := do(t, "GET", hs.URL+"/v1/threads/t1", tok, "", nil)
	var v struct {
		Thread string          `json:"thread"`
		Seq    uint64          `json:"seq"`
		Status string          `json:"status"`
		View   json.RawMessage `json:"view"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v.Thread != "t1" || v.Seq != 2 || v.Status != "running" || !strings.Contains(string(v.View), `"a;"`) {
		t.Fatalf("view: %d %s", code, body)
	}
	if code, _ := do(t, "GET", hs.URL+"/v1/threads/t1", tok, "", http.Header{"If-None-Match": {`"2"`}}); code != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", code)
	}
	// No pipeline answering at all: 503, not a hang.
	if code, _ := do(t, "GET", hs.URL+"/v1/threads/nobody-home", tok, "", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("no responder: %d", code)
	}
}

// TestThreadListRacingDelete: keys that go away between the listing's
// consumer counting them and its fetch are simply not listed; the listing
// neither fails nor waits out its deadline for messages that will not come.
func TestThreadListRacingDelete(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	const timeout = 20 * time.Second
	srv, hs := newServer(t, nc, func(c *Config) { c.Hub.SnapshotTimeout = timeout })
	tok := token(t, "acme")
	ctx := context.Background()
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: wire.DefaultViewsKV})
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_"+wire.DefaultViewsKV)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		keys    []string // put before the listing
		removed []string // purged from the stream once the consumer has counted them
		want    []string
	}{
		{"some removed", []string{"r1", "r2", "r3"}, []string{"r2", "r3"}, []string{"r1"}},
		{"all removed", []string{"g1", "g2"}, []string{"g1", "g2"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := st.Purge(ctx); err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.keys {
				if _, err := kv.Put(ctx, "acme."+k, []byte("ckpt")); err != nil {
					t.Fatal(err)
				}
			}
			// The listing's own steps, with the keys purged between the
			// consumer counting them and the first fetch.
			lctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			cons, del, err := srv.openListing(lctx, js, "acme")
			if err != nil || cons == nil {
				t.Fatalf("openListing: %v %v", cons, err)
			}
			defer del()
			if got := cons.CachedInfo().NumPending; got != uint64(len(tt.keys)) {
				t.Fatalf("consumer counted %d keys, want %d", got, len(tt.keys))
			}
			for _, k := range tt.removed {
				if err := st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+wire.DefaultViewsKV+".acme."+k)); err != nil {
					t.Fatal(err)
				}
			}
			page := pageOf{limit: 100, out: []ThreadInfo{}}
			t0 := time.Now()
			if err := srv.readListing(lctx, cons, func(string) bool { return true }, &page); err != nil {
				t.Fatal(err)
			}
			took := time.Since(t0)
			out, _ := page.result()
			var ids []string
			for _, ti := range out {
				ids = append(ids, ti.Thread)
			}
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("threads %v, want %v", ids, tt.want)
			}
			// Not a speed check: a listing that waited for the removed keys
			// would take the whole deadline.
			if took >= timeout/2 {
				t.Fatalf("listing took %v: it waited for keys that were gone (deadline %v)", took, timeout)
			}
			// The same listing through the endpoint: what is left.
			code, body := do(t, "GET", hs.URL+"/v1/threads", tok, "", nil)
			var got struct{ Threads []ThreadInfo }
			if code != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got.Threads) != len(tt.want) {
				t.Fatalf("endpoint: %d %s, want %v", code, body, tt.want)
			}
		})
	}
}

func TestThreadList(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	_, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	if code, body := do(t, "GET", hs.URL+"/v1/threads", tok, "", nil); code != 200 || !strings.Contains(body, `"threads":[]`) {
		t.Fatalf("no bucket: %d %s", code, body)
	}
	ctx := context.Background()
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: wire.DefaultViewsKV})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"acme.t1", "acme." + wire.EncodeThread("a.b*"), "other.t9", "acme.x2", "acme.gone"} {
		if _, err := kv.Put(ctx, k, []byte("ckpt")); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete(ctx, "acme.gone"); err != nil { // a deleted key is not listed
		t.Fatal(err)
	}
	tests := []struct {
		name string
		tok  string
		want []string
	}{
		{"whole tenant", tok, []string{"a.b*", "t1", "x2"}},
		{"thread patterns", token(t, "acme", "t*", "a.*"), []string{"a.b*", "t1"}},
		{"other tenant", token(t, "other"), []string{"t9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, "GET", hs.URL+"/v1/threads", tt.tok, "", nil)
			var out struct{ Threads []ThreadInfo }
			if code != 200 || json.Unmarshal([]byte(body), &out) != nil {
				t.Fatalf("%d %s", code, body)
			}
			var ids []string
			for _, ti := range out.Threads {
				ids = append(ids, ti.Thread)
				if ti.Updated.IsZero() {
					t.Errorf("%s: no updated time", ti.Thread)
				}
			}
			if strings.Join(ids, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("threads %v, want %v", ids, tt.want)
			}
		})
	}

	// Live: one entry per frame of the tenant's threads.
	th := newTestThread(t, connect(t, ns), "acme", "live1")
	other := newTestThread(t, connect(t, ns), "other", "live1")
	c := openSSE(t, hs.URL+"/v1/threads?live=1", tok, nil)
	other.publish(t, "x;")
	th.publish(t, "a;")
	for {
		m, err := c.next()
		if err != nil {
			t.Fatal(err)
		}
		if m.data == "" {
			continue
		}
		var ti ThreadInfo
		if err := json.Unmarshal([]byte(m.data), &ti); err != nil || ti.Thread != "live1" || ti.Seq != 2 || ti.Status != "running" {
			t.Fatalf("live entry %q %v", m.data, err)
		}
		break
	}
}

// TestThreadListLiveParts: the live thread list gives one entry per
// frame, whole or in parts (wire.Publish, as the pipeline sends a frame
// above its max payload), with the thread from the subject, the seq from
// Tc-Seq and the status from Tc-Status; a frame without Tc-Status has the
// status of its body when whole, none when in parts.
func TestThreadListLiveParts(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	_, hs := newServer(t, nc, nil)
	c := openSSE(t, hs.URL+"/v1/threads?live=1", token(t, "acme"), nil)
	defer c.close()
	pad := strings.Repeat("p", 1000)
	tests := []struct {
		thread    string
		status    string // Tc-Status ("": none)
		partSize  int    // 0: whole
		wantEntry string
	}{
		{"whole", "finished", 0, `{"thread":"whole","seq":11,"status":"finished"}`},
		{"in.parts", "finished", 256, `{"thread":"in.parts","seq":12,"status":"finished"}`},
		{"whole-no-header", "", 0, `{"thread":"whole-no-header","seq":13,"status":"finished"}`},
		{"parts-no-header", "", 256, `{"thread":"parts-no-header","seq":14}`},
		{"last", "idle", 0, `{"thread":"last","seq":15,"status":"idle"}`},
	}
	for i, tt := range tests {
		seq := strconv.Itoa(11 + i)
		status := tt.status
		if status == "" {
			status = "finished"
		}
		body := fmt.Sprintf(`{"tenant":"acme","thread":%q,"seq":%s,"prev":0,"status":%q,"events":[{"type":"CUSTOM","name":"pad","value":%q}]}`,
			tt.thread, seq, status, pad)
		h := nats.Header{wire.HeaderSeq: {seq}, wire.HeaderPrev: {"0"}}
		if tt.status != "" {
			h[wire.HeaderStatus] = []string{tt.status}
		}
		size := tt.partSize
		if size == 0 {
			size = len(body)
		}
		if err := wire.Publish(nc, &nats.Msg{Subject: wire.ViewSubject("acme", wire.EncodeThread(tt.thread)), Header: h, Data: []byte(body)}, size); err != nil {
			t.Fatal(err)
		}
	}
	timer := time.AfterFunc(5*time.Second, c.cancel)
	defer timer.Stop()
	var got []string
	for len(got) < len(tests) {
		m, err := c.next()
		if err != nil {
			t.Fatalf("entries %q, then %v", got, err)
		}
		if m.data == "" {
			continue
		}
		var ti ThreadInfo
		if err := json.Unmarshal([]byte(m.data), &ti); err != nil || ti.Updated.IsZero() {
			t.Fatalf("entry %q: %v", m.data, err)
		}
		ti.Updated = time.Time{}
		b, _ := json.Marshal(struct {
			Thread string `json:"thread"`
			Seq    uint64 `json:"seq,omitempty"`
			Status string `json:"status,omitempty"`
		}{ti.Thread, ti.Seq, ti.Status})
		got = append(got, string(b))
	}
	for i, tt := range tests {
		if got[i] != tt.wantEntry {
			t.Errorf("entry %d: %s, want %s", i, got[i], tt.wantEntry)
		}
	}
}

// TestThreadListPages: ?limit= and ?after= page through a tenant's
// threads in id order, each page but the last with a next cursor, every
// thread exactly once, past the old 10,000-thread cut; bad parameters are a
// 400 with a JSON error.
func TestThreadListPages(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	_, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	ctx := context.Background()
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: wire.DefaultViewsKV})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10050
	want := make([]string, 0, n)
	for i := range n {
		id := fmt.Sprintf("t%05d", i)
		if i%1000 == 7 {
			id += " with.dots*" // escaped tokens sort by id too
		}
		want = append(want, id)
	}
	// Keys put in an order unrelated to the ids.
	for i := range n {
		id := want[(i*7919)%n]
		if _, err := kv.Put(ctx, wire.CheckpointKey("acme", wire.EncodeThread(id)), []byte("ckpt")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(ctx, wire.CheckpointKey("other", "t00001"), []byte("ckpt")); err != nil {
		t.Fatal(err)
	}
	page := func(query string) (ids []string, next string) {
		t.Helper()
		req, _ := http.NewRequest("GET", hs.URL+"/v1/threads"+query, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Threads []ThreadInfo
			Next    string
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); resp.StatusCode != 200 || err != nil {
			t.Fatalf("%s: %d %v", query, resp.StatusCode, err)
		}
		for _, ti := range out.Threads {
			ids = append(ids, ti.Thread)
		}
		return ids, out.Next
	}
	// Default page: the first 1000, and a cursor.
	if ids, next := page(""); len(ids) != defaultListed || ids[0] != want[0] || next == "" {
		t.Fatalf("default page: %d threads from %q, next %q", len(ids), ids[0], next)
	}
	var got []string
	query := "?limit=3000"
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("too many pages")
		}
		ids, next := page(query)
		got = append(got, ids...)
		if next == "" {
			break
		}
		query = "?limit=3000&after=" + url.QueryEscape(next)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %d threads (first %q, last %q), want %d in id order", len(got), got[0], got[len(got)-1], n)
	}
	if ids, next := page("?limit=10000&after=" + url.QueryEscape(wire.EncodeThread(want[n-2]))); len(ids) != 1 || ids[0] != want[n-1] || next != "" {
		t.Fatalf("last page: %v, next %q", ids, next)
	}
	for _, q := range []struct{ query, reason string }{
		{"?limit=0", "bad_limit"}, {"?limit=10001", "bad_limit"}, {"?limit=x", "bad_limit"},
		{"?after=not.a.token", "bad_cursor"}, {"?after=", "bad_cursor"},
	} {
		code, body := do(t, "GET", hs.URL+"/v1/threads"+q.query, tok, "", nil)
		if code != http.StatusBadRequest || !strings.Contains(body, `"error":"`+q.reason+`"`) || !strings.Contains(body, `"detail"`) {
			t.Errorf("%s: %d %s; want 400 %s", q.query, code, body, q.reason)
		}
	}
}

func TestTap(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	pub := connect(t, ns)
	_, hs := newServer(t, nc, nil)
	publish := func() {
		for _, m := range []struct{ subj, data string }{
			{wire.TapSubject("other", "RUN_STARTED", "t1"), `{"tenant":"other"}`},
			{wire.TapSubject("acme", "RUN_STARTED", "t1"), `{"n":1}`},
			{wire.TapSubject("acme", "RUN_STARTED", "x1"), `{"n":2}`},
			{wire.TapSubject("acme", "TEXT_MESSAGE_CONTENT", "t1"), `{"n":3}`},
			{wire.TapSubject("acme", wire.RunSummaryType, "t1"), `{"n":4}`},
		} {
			if err := pub.Publish(m.subj, []byte(m.data)); err != nil {
				t.Fatal(err)
			}
		}
		_ = pub.Flush()
	}
	tests := []struct {
		name, query string
		tok         string
		ndjson      bool
		want        []string
	}{
		{"all", "", token(t, "acme"), false, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`}},
		{"types", "?types=RUN_STARTED,RUN_SUMMARY", token(t, "acme"), false, []string{`{"n":1}`, `{"n":2}`, `{"n":4}`}},
		{"ndjson and thread pattern", "?format=ndjson", token(t, "acme", "t*"), true, []string{`{"n":1}`, `{"n":3}`, `{"n":4}`}},
		{"many types, repeated, through one subscription", "?types=RUN_STARTED,RUN_SUMMARY,RUN_ERROR,STEP_STARTED,STEP_FINISHED,RUN_STARTED,RUN_STARTED",
			token(t, "acme"), false, []string{`{"n":1}`, `{"n":2}`, `{"n":4}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/v1/tap"+tt.query, nil)
			req.Header.Set("Authorization", "Bearer "+tt.tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v", err, resp)
			}
			defer resp.Body.Close()
			publish()
			var got []string
			buf := make([]byte, 4096)
			var acc string
			deadline := time.AfterFunc(3*time.Second, cancel)
			defer deadline.Stop()
			for {
				n, err := resp.Body.Read(buf)
				acc += string(buf[:n])
				got = got[:0]
				for _, line := range strings.Split(acc, "\n") {
					if tt.ndjson && strings.HasPrefix(line, "{") {
						got = append(got, line)
					} else if !tt.ndjson && strings.HasPrefix(line, "data: ") {
						got = append(got, strings.TrimPrefix(line, "data: "))
					}
				}
				if len(got) >= len(tt.want) || err != nil {
					break
				}
			}
			// NATS keeps order per publisher, but the two type subscriptions
			// may interleave; compare as sets.
			if strings.Join(sortStrings(got), " ") != strings.Join(sortStrings(tt.want), " ") {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	if code, _ := do(t, "GET", hs.URL+"/v1/tap?types=NOPE", token(t, "acme"), "", nil); code != http.StatusBadRequest {
		t.Fatalf("bad type: %d", code)
	}
}

// TestTapTypesBounded: a ?types= list is validated and bounded with a
// JSON error naming the problem, and whatever the list, a tap reader costs
// the shared connection at most tapSubsMax subscriptions.
func TestTapTypesBounded(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	_, hs := newServer(t, nc, nil)
	tok := token(t, "acme")
	many := strings.TrimSuffix(strings.Repeat("RUN_STARTED,", 50000), ",")
	for _, tt := range []struct{ query, wantErr, wantDetail string }{
		{"?types=" + many, "too_many_types", "types lists 50000 entries; at most 64 are allowed"},
		{"?types=RUN_STARTED,NOPE", "bad_type", `types: "NOPE" is not an AG-UI event type or RUN_SUMMARY`},
		{"?types=RUN_STARTED,", "bad_type", `types: "" is not`},
	} {
		code, body := do(t, "GET", hs.URL+"/v1/tap"+tt.query, tok, "", nil)
		var e struct{ Error, Detail string }
		if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusBadRequest ||
			e.Error != tt.wantErr || !strings.Contains(e.Detail, tt.wantDetail) {
			t.Errorf("%.40s: %d %s; want 400 %s %q", tt.query, code, body, tt.wantErr, tt.wantDetail)
		}
	}
	for _, tt := range []struct {
		query    string
		wantSubs uint32
	}{
		{"", 1},
		{"?types=" + strings.TrimSuffix(strings.Repeat("RUN_STARTED,", 64), ","), 1},
		{"?types=RUN_STARTED,RUN_FINISHED", 2},
		{"?types=RUN_STARTED,RUN_FINISHED,RUN_ERROR,STEP_STARTED,STEP_FINISHED,CUSTOM,RAW,RUN_SUMMARY", 1},
	} {
		before := ns.NumSubscriptions()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/v1/tap"+tt.query, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%.40s: %v %v", tt.query, err, resp)
		}
		if got := ns.NumSubscriptions() - before; got != tt.wantSubs {
			t.Errorf("%.40s: %d subscriptions, want %d", tt.query, got, tt.wantSubs)
		}
		cancel()
		resp.Body.Close()
		testsupport.WaitFor(t, 5*time.Second, "the tap's subscriptions to go", func() bool { return ns.NumSubscriptions() == before })
	}
}

// TestTapSlowReaderCut: a tap reader that stops reading is cut alone once
// messages for it are dropped (a last comment says why, Ended{slow} counts
// it), while another reader on the same shared connection gets everything.
func TestTapSlowReaderCut(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	pub := connect(t, ns)
	srv, hs := newServer(t, nc, nil)
	open := func(tenant string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", hs.URL+"/v1/tap?format=ndjson", nil)
		req.Header.Set("Authorization", "Bearer "+token(t, tenant))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", err, resp)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	slowResp := open("slow")
	fastResp := open("fast")
	fast := make(chan int, 1)
	go func() {
		n := 0
		sc := bufio.NewScanner(fastResp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if n++; n == 200 {
				break
			}
		}
		fast <- n
	}()
	big := `{"pad":"` + strings.Repeat("x", 16<<10) + `"}`
	for i := 0; i < 3*tapPending; i++ {
		if err := pub.Publish(wire.TapSubject("slow", "CUSTOM", "t"), []byte(big)); err != nil {
			t.Fatal(err)
		}
		if i < 200 {
			if err := pub.Publish(wire.TapSubject("fast", "CUSTOM", "t"), []byte(`{"i":1}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = pub.Flush()
	select {
	case n := <-fast:
		if n != 200 {
			t.Fatalf("fast reader got %d of 200", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fast reader starved")
	}
	// The slow reader now reads: its stream ends, cut, well before all
	// 3×tapPending messages.
	got := 0
	sc := bufio.NewScanner(slowResp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		got++
	}
	if got >= 3*tapPending {
		t.Fatalf("slow reader read all %d messages: nothing was dropped", got)
	}
	testsupport.WaitFor(t, 5*time.Second, "the cut to be counted", func() bool {
		return counterValue(srv.Metrics().Ended.WithLabelValues(EndSlow)) == 1 && counterValue(srv.Metrics().TapDropped) > 0
	})
	if !nc.IsConnected() {
		t.Fatal("the shared connection was lost")
	}
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestTenantConnectionLimit(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	pub := connect(t, ns)
	newTestThread(t, pub, "acme", "t1").publish(t, "a;")
	newTestThread(t, pub, "zeta", "t1").publish(t, "a;")
	srv, hs := newServer(t, nc, func(c *Config) { c.Quota.Default.Streams = 1 })
	c := openSSE(t, hs.URL+"/v1/threads/t1/events", token(t, "acme"), nil)
	if _, code := tryOpenSSE(t, hs.URL+"/v1/threads/t1/events", token(t, "acme"), nil); code != http.StatusTooManyRequests {
		t.Fatalf("second acme stream: %d, want 429", code)
	}
	openSSE(t, hs.URL+"/v1/threads/t1/events", token(t, "zeta"), nil)
	c.close()
	testsupport.WaitFor(t, 5*time.Second, "slot released", func() bool { return srv.quota.Usage("acme").Streams == 0 })
	openSSE(t, hs.URL+"/v1/threads/t1/events", token(t, "acme"), nil)
}

// Run drains on cancel: every stream ends with its cursor, Run returns
// after its goroutines, and MaxLifetime ends a stream the same way.
func TestShutdownAndLifetime(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	th := newTestThread(t, connect(t, ns), "acme", "t1")
	th.publish(t, "a;")
	cfg := DefaultConfig()
	cfg.AuthKey = testKey
	cfg.MaxLifetime = 300 * time.Millisecond
	cfg.Heartbeat = 50 * time.Millisecond
	srv, err := New(nc, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx, ln, 5*time.Second) }()
	base := "http://" + ln.Addr().String()
	tok := token(t, "acme")

	readEnd := func(c *sseClient) (string, bool) {
		heartbeats := 0
		for {
			m, err := c.next()
			if err != nil {
				return "", false
			}
			if m.comment == "keep-alive" {
				heartbeats++
			}
			if strings.HasPrefix(m.comment, "end ") {
				return m.comment, heartbeats > 0
			}
		}
	}
	c := openSSE(t, base+"/v1/threads/t1/events", tok, nil)
	if end, hb := readEnd(c); end != "end reason=lifetime after=2" || !hb {
		t.Fatalf("lifetime end %q (heartbeats seen: %v)", end, hb)
	}
	c2 := openSSE(t, base+"/v1/threads/t1/events", tok, http.Header{"Last-Event-Id": {"2"}})
	th.publish(t, "b;")
	var a aguiModel
	a.text = "a;"
	a.follow(t, c2, th.Text, 5*time.Second)
	cancel()
	if end, _ := readEnd(c2); end != "end reason=shutdown after=4" {
		t.Fatalf("shutdown end %q", end)
	}
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	if conn, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		conn.Close()
		t.Fatal("listener still open after Run returned")
	}
}

// TestDeadLetters: dead letters published while nobody listened are kept
// by the pipeline's stream and read per tenant, page by page: a tenant sees
// its own only, a thread-scoped token its threads' only.
func TestDeadLetters(t *testing.T) {
	ns := startNATS(t)
	startIngest(t, ns, 4)
	_, hs := newServer(t, connect(t, ns), func(c *Config) { c.Hub.Partitions = 4 })
	js, err := jetstream.New(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	pub := func(tenant, thread, data string) {
		subj, _ := wire.EventSubject(tenant, thread)
		if _, err := js.Publish(context.Background(), subj, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	pub("acme", "t1", `not json`)
	pub("acme", "t2", `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`) // before RUN_STARTED: L1
	pub("other", "t9", `not json either`)
	pub("acme", "t1", `{"type":"RUN_STARTED","threadId":"t1","runId":"r","x":`+strings.Repeat(" ", 5000)+`1e999}`)
	type page struct {
		DeadLetters []DeadLetter
		Next        string
	}
	get := func(tok, query string) page {
		t.Helper()
		code, body := do(t, "GET", hs.URL+"/v1/deadletters"+query, tok, "", nil)
		var p page
		if code != 200 || json.Unmarshal([]byte(body), &p) != nil {
			t.Fatalf("%s: %d %.300s", query, code, body)
		}
		return p
	}
	acme := token(t, "acme")
	testsupport.WaitFor(t, 10*time.Second, "acme's three dead letters", func() bool { return len(get(acme, "").DeadLetters) == 3 })
	// Shards publish dead letters of different threads in any order: each
	// is found by what it says.
	all := get(acme, "").DeadLetters
	found := 0
	for i, dl := range all {
		if i > 0 && dl.Seq <= all[i-1].Seq {
			t.Errorf("not oldest first: %d after %d", dl.Seq, all[i-1].Seq)
		}
		switch {
		case dl.Thread == "t1" && dl.Kind == wire.ErrKindDecode && dl.Data == "not json" && dl.EventSeq != 0 && !dl.Truncated:
			found++
		case dl.Thread == "t2" && dl.Kind == wire.ErrKindInvalid && strings.Contains(dl.Error, "L1"):
			found++
		case dl.Thread == "t1" && dl.Kind == wire.ErrKindInvalid && strings.Contains(dl.Error, "out of range") &&
			dl.Truncated && dl.Bytes > 5000 && len(dl.Data) == deadLetterData:
			found++
		}
	}
	if found != 3 {
		t.Fatalf("dead letters %+v: %d of the 3 expected", all, found)
	}
	// Paged one at a time: the same three, in order.
	var paged []uint64
	for q := "?limit=1"; ; {
		p := get(acme, q)
		for _, dl := range p.DeadLetters {
			paged = append(paged, dl.Seq)
		}
		if p.Next == "" {
			break
		}
		q = "?limit=1&after=" + p.Next
	}
	if len(paged) != 3 || paged[0] != all[0].Seq || paged[2] != all[2].Seq {
		t.Fatalf("paged %v, want the seqs of %+v", paged, all)
	}
	if p := get(token(t, "other"), ""); len(p.DeadLetters) != 1 || p.DeadLetters[0].Thread != "t9" {
		t.Fatalf("other tenant: %+v", p)
	}
	if p := get(token(t, "acme", "t2"), ""); len(p.DeadLetters) != 1 || p.DeadLetters[0].Thread != "t2" {
		t.Fatalf("thread-scoped token: %+v", p)
	}
	// The largest cursor has nothing after it: an empty last page.
	if p := get(acme, "?after=18446744073709551615"); len(p.DeadLetters) != 0 || p.Next != "" {
		t.Errorf("after the largest seq: %+v, want an empty last page", p)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?after=x", "?after=18446744073709551616"} {
		if code, _ := do(t, "GET", hs.URL+"/v1/deadletters"+q, acme, "", nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
	if code, _ := do(t, "GET", hs.URL+"/v1/deadletters", "", "", nil); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
}
