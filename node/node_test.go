package node_test

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/pipeline"
)

var testKey = []byte("node-test-key-0123456789")

func testConfig(t *testing.T) Config {
	c := DefaultConfig()
	c.HTTP, c.NatsListen, c.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	c.AuthKey = testKey
	c.Pipeline.Partitions = 4
	c.Drain = 10 * time.Second
	c.Logger = slog.New(slog.DiscardHandler)
	return c
}

func token(t *testing.T, tenant string) string {
	t.Helper()
	tok, err := auth.Mint(testKey, auth.Claims{Tenant: tenant, Scope: "read publish", Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func do(t *testing.T, method, url, tok, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-ndjson")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestNodeEmbedded: every part behind one port — the bridge takes events
// (tokens checked), ingest reduces them, the fanout serves the view and the
// dashboard, /metrics has every part — and Stop leaves no goroutine.
func TestNodeEmbedded(t *testing.T) {
	base := testsupport.CountGoroutines()
	n, err := Start(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	u := n.URL()
	testsupport.WaitFor(t, 20*time.Second, "/readyz", func() bool { c, _ := do(t, "GET", u+"/readyz", "", ""); return c == 200 })
	if !strings.HasPrefix(n.NatsURL(), "nats://127.0.0.1:") || n.Conn() == nil || !n.Conn().IsConnected() {
		t.Errorf("NATS %q", n.NatsURL())
	}

	acme := token(t, "acme")
	reader, err := auth.Mint(testKey, auth.Claims{Tenant: "acme", Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := auth.Mint(testKey, auth.Claims{Tenant: "acme", Threads: []string{"th.2"}, Scope: "read publish", Expiry: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"type":"RUN_STARTED","threadId":"th.1","runId":"r1"}
{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","role":"assistant","delta":"hello"}
{"type":"RUN_FINISHED","threadId":"th.1","runId":"r1"}
`
	for _, tt := range []struct {
		name, tenant, tok string
		want              int
	}{{"own tenant", "acme", acme, 200}, {"other tenant", "globex", acme, 403}, {"no token", "acme", "", 401},
		{"token for another thread", "acme", narrow, 403}, {"read-only token", "acme", reader, 403}} {
		if code, b := do(t, "POST", u+"/v1/ingest/"+tt.tenant+"/th.1", tt.tok, body); code != tt.want {
			t.Errorf("bridge, %s: %d %s, want %d", tt.name, code, b, tt.want)
		}
	}
	testsupport.WaitFor(t, 20*time.Second, "the view", func() bool {
		code, b := do(t, "GET", u+"/v1/threads/th.1", acme, "")
		return code == 200 && strings.Contains(b, `"status":"finished"`) && strings.Contains(b, `"hello"`)
	})
	if code, b := do(t, "GET", u+"/v1/threads/th.1", token(t, "globex"), ""); code != 404 {
		t.Errorf("another tenant's thread: %d %s", code, b)
	}
	if code, b := do(t, "GET", u+"/", "", ""); code != 200 || !strings.Contains(b, "<html") {
		t.Errorf("dashboard: %d", code)
	}
	code, m := do(t, "GET", u+"/metrics", "", "")
	for _, want := range []string{`threadcast_ingest_events_total{type="RUN_FINISHED"} 1`, "threadcast_fanout_", "threadcast_bridge_events_accepted_total 3", "go_goroutines", "process_"} {
		if code != 200 || !strings.Contains(m, want) {
			t.Errorf("/metrics %d: no %q", code, want)
		}
	}

	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if code, _ := do(t, "GET", u+"/livez", "", ""); code != 0 {
		t.Errorf("still serving after Stop: %d", code)
	}
	select {
	case <-n.Failed():
		t.Errorf("failed: %v", n.Err())
	default:
	}
	base.Exited(t)
}

// TestNodeParts: three nodes on one external NATS, one part each — demo
// agents, ingest, fanout — work together as the single node does, and
// each serves only its own routes.
func TestNodeParts(t *testing.T) {
	base := testsupport.CountGoroutines()
	sc := natsembed.DefaultConfig()
	sc.StoreDir = t.TempDir()
	srv, err := natsembed.Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: this one after every node stopped.
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown(); base.Exited(t) })

	start := func(ingest, fanout, demoOn bool) *Node {
		c := testConfig(t)
		c.NatsURL, c.DataDir = srv.ClientURL(), ""
		c.Ingest, c.Fanout, c.Demo = ingest, fanout, demoOn
		c.DemoConfig = demo.Config{Tenants: []string{"acme"}, Agents: 1, TimeScale: 0.05, Seed: 3}
		n, err := Start(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := n.Stop(); err != nil {
				t.Error(err)
			}
		})
		return n
	}
	in := start(true, false, false)
	fo := start(false, true, false)
	dm := start(false, false, true)

	for _, tt := range []struct {
		name string
		n    *Node
		path string
		want int
	}{
		{"ingest: no fanout API", in, "/v1/threads", 404},
		{"ingest: no dashboard", in, "/", 404},
		{"fanout: no bridge", fo, "/v1/ingest/acme/x", 404},
		{"demo: no API", dm, "/v1/threads", 404},
		{"demo: metrics", dm, "/metrics", 200},
		{"fanout: ready", fo, "/readyz", 200},
	} {
		method := "GET"
		if strings.HasPrefix(tt.path, "/v1/ingest/") {
			method = "POST"
		}
		if code, _ := do(t, method, tt.n.URL()+tt.path, token(t, "acme"), ""); code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, code, tt.want)
		}
	}
	acme := token(t, "acme")
	testsupport.WaitFor(t, 30*time.Second, "a demo thread listed by the fanout node", func() bool {
		code, b := do(t, "GET", fo.URL()+"/v1/threads", acme, "")
		var l struct{ Threads []json.RawMessage }
		return code == 200 && json.Unmarshal([]byte(b), &l) == nil && len(l.Threads) > 0
	})
	if err := dm.Stop(); err != nil {
		t.Fatal(err)
	}
	if s := side(dm).DemoStats(); s.Events == 0 || s.Threads == 0 {
		t.Errorf("demo stats %+v", s)
	}
}

// TestNodeFailed: a part that ends on its own closes Failed, with the cause.
func TestNodeFailed(t *testing.T) {
	n, err := Start(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if n.Err() != nil {
		t.Fatal(n.Err())
	}
	_ = n.Listener().Close() // the HTTP server's listener goes away under it
	select {
	case <-n.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("Failed not closed")
	}
	if err := n.Err(); err == nil || !strings.Contains(err.Error(), "node: http") {
		t.Errorf("Err = %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	base := testsupport.CountGoroutines()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		give func(c *Config)
		want error
	}{
		{"no key", func(c *Config) { c.AuthKey = nil }, ErrConfig},
		{"nothing to run", func(c *Config) { c.Ingest, c.Fanout = false, false }, ErrConfig},
		{"embedded without data", func(c *Config) { c.DataDir = "" }, ErrConfig},
		{"no drain", func(c *Config) { c.Drain = 0 }, ErrConfig},
		{"no idle timeout", func(c *Config) { c.HTTPIdleTimeout = 0 }, ErrConfig},
		{"no header timeout", func(c *Config) { c.HTTPHeaderTimeout = -1 }, ErrConfig},
		{"no header bound", func(c *Config) { c.HTTPMaxHeaderBytes = 0 }, ErrConfig},
		{"connection cap over the fd limit", func(c *Config) { c.MaxConns = int(fdLimit(t)) }, connlimit.ErrTooMany},
		{"per-source cap over the node cap", func(c *Config) { c.MaxConns, c.MaxConnsPerSource = 10, 11 }, ErrConfig},
		{"negative per-source cap", func(c *Config) { c.MaxConnsPerSource = -2 }, ErrConfig},
		{"bad pipeline", func(c *Config) { c.Pipeline.Partitions = 0 }, pipeline.ErrConfig},
		{"data dir under a file", func(c *Config) { c.DataDir = filepath.Join(file, "d") }, ErrDataDir},
		{"NATS port taken", func(c *Config) { c.NatsListen = taken.Addr().String() }, ErrNatsListen},
		{"NATS address without port", func(c *Config) { c.NatsListen = "127.0.0.1" }, ErrNatsListen},
		{"NATS bad port", func(c *Config) { c.NatsListen = "127.0.0.1:x" }, ErrNatsListen},
		{"HTTP port taken", func(c *Config) { c.HTTP = taken.Addr().String() }, ErrHTTPListen},
		{"no NATS at the URL", func(c *Config) { c.NatsURL = "nats://" + taken.Addr().String() }, ErrNats},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(t)
			tt.give(&c)
			n, err := Start(c)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Start: %v, want %v", err, tt.want)
			}
			if n != nil {
				t.Error("a node returned with the error")
			}
		})
	}
	base.Exited(t)
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, KeyFile)
	k1, created, err := LoadOrCreateKey(path)
	if err != nil || !created || len(k1) != 32 {
		t.Fatalf("create: %d bytes, created %v, %v", len(k1), created, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi.Mode(), err)
	}
	k2, created, err := LoadOrCreateKey(path)
	if err != nil || created || string(k1) != string(k2) {
		t.Fatalf("load: created %v, same %v, %v", created, string(k1) == string(k2), err)
	}
	for _, tt := range []struct{ name, content string }{
		{"not hex", "zz\n"},
		{"short", hex.EncodeToString([]byte("short")) + "\n"},
		{"empty", ""},
	} {
		p := filepath.Join(dir, tt.name)
		if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadOrCreateKey(p); err == nil || !strings.Contains(err.Error(), "not a hex key") {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	if _, _, err := LoadOrCreateKey(filepath.Join(dir, "missing", KeyFile)); err == nil {
		t.Error("no error for a missing directory")
	}
}

// TestNodeEmbeddedDemoOnly: a node that owns its NATS server creates the
// stream even without ingest, so the demo's events are stored (for an
// ingest started later, e.g. cmd/ingest --nats-url).
func TestNodeEmbeddedDemoOnly(t *testing.T) {
	c := testConfig(t)
	c.Ingest, c.Fanout, c.Demo = false, false, true
	c.DemoConfig = demo.Config{Tenants: []string{"acme"}, Agents: 1, TimeScale: 0.05, Seed: 5}
	n, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(n.Conn())
	if err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 20*time.Second, "stored demo events", func() bool {
		s, err := js.Stream(t.Context(), c.Pipeline.Stream)
		return err == nil && s.CachedInfo().State.Msgs > 0
	})
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if s := side(n).DemoStats(); s.Events == 0 || s.Errors != 0 {
		t.Errorf("demo stats %+v", s)
	}
}

// TestNodeConnections: ingest, the fanout, the auth callout and each demo
// tenant's agents have their own NATS connection (so a join storm on the
// fanout's cannot hold up ingest's deliveries), and the snapshot service is
// on ingest's alone.
func TestNodeConnections(t *testing.T) {
	cfg := testConfig(t)
	cfg.Demo = true
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Stop() }()
	testsupport.WaitFor(t, 20*time.Second, "/readyz", func() bool { c, _ := do(t, "GET", n.URL()+"/readyz", "", ""); return c == 200 })
	cz, err := side(n).Server().Connz(&server.ConnzOptions{Subscriptions: true})
	if err != nil {
		t.Fatal(err)
	}
	snapSubs := map[string]int{}
	for _, c := range cz.Conns {
		snapSubs[c.Name] += 0
		for _, s := range c.Subs {
			if strings.HasPrefix(s, "tc.snap.") {
				snapSubs[c.Name]++
			}
		}
	}
	for _, name := range []string{"threadcast", "threadcast-fanout", "threadcast-auth", "threadcast-demo-acme", "threadcast-demo-globex", "threadcast-demo-initech"} {
		if _, ok := snapSubs[name]; !ok {
			t.Errorf("no NATS connection named %q (have %v)", name, snapSubs)
		}
	}
	if snapSubs["threadcast"] != cfg.Pipeline.Partitions || snapSubs["threadcast-fanout"] != 0 {
		t.Errorf("snapshot subscriptions per connection %v; want %d on threadcast only", snapSubs, cfg.Pipeline.Partitions)
	}
}

func fdLimit(t *testing.T) uint64 {
	n, err := connlimit.FDLimit()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNodeMaxHeaderBytes: a request whose line and headers exceed
// HTTPMaxHeaderBytes is answered 431 (net/http's refusal, with its slack of
// 4 KiB) whichever server holds the port (the fanout's, or the node's own
// without the fanout), and one within it is served. The default bound
// (DefaultConfig) refuses a 128 KiB request line, which net/http's own
// default, 1 MiB, would read whole.
func TestNodeMaxHeaderBytes(t *testing.T) {
	for _, tt := range []struct {
		name  string
		bound int // 0: DefaultConfig's
		give  func(c *Config)
	}{
		{"fanout, default bound", 0, func(c *Config) {}},
		{"fanout, 16 KiB", 16 << 10, func(c *Config) {}},
		{"no fanout, 16 KiB", 16 << 10, func(c *Config) { c.Fanout, c.Dashboard, c.Ingest = false, false, true }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(t)
			tt.give(&c)
			if tt.bound != 0 {
				c.HTTPMaxHeaderBytes = tt.bound
			}
			bound := c.HTTPMaxHeaderBytes
			n, err := Start(c)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = n.Stop() })
			get := func(pad int) int {
				req, _ := http.NewRequest("GET", n.URL()+"/livez?pad="+strings.Repeat("x", pad), nil)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.StatusCode
			}
			if code := get(bound / 2); code != http.StatusOK {
				t.Errorf("a request line of %d bytes under the bound of %d: %d, want 200", bound/2, bound, code)
			}
			if code := get(2 * bound); code != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("a request line of %d bytes over the bound of %d: %d, want 431", 2*bound, bound, code)
			}
		})
	}
}

// TestNodeConnectionCap: over real TCP, idle keep-alive connections fill
// the node's cap, the next connection is refused at once with a 503 (and
// counted), and the idle timeout frees the slots, after which /livez
// answers again.
func TestNodeConnectionCap(t *testing.T) {
	c := testConfig(t)
	c.MaxConns, c.MaxConnsPerSource = 4, 0 // one source fills the node's cap
	c.HTTPIdleTimeout = 500 * time.Millisecond
	n, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	get := func(conn net.Conn, path string) string {
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return "write: " + err.Error()
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return "read: " + err.Error()
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Status
	}
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", n.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	for range 4 {
		if got := get(dial(), "/livez"); got != "200 OK" {
			t.Fatalf("within the cap: %s", got)
		}
	}
	if got := get(dial(), "/livez"); got != "503 Service Unavailable" {
		t.Fatalf("past the cap: %s", got)
	}
	capped := n.Listener().(*connlimit.Listener)
	testsupport.WaitFor(t, 10*time.Second, "the idle timeout to free the slots", func() bool { return capped.Open() == 0 })
	if capped.Refused() != 1 {
		t.Errorf("%d refused, want 1", capped.Refused())
	}
	if got := refusedMetric(t, n); got != `node 1 source 0` {
		t.Errorf("refusals counted by reason: %s, want node 1 source 0", got)
	}
}

// refusedMetric is threadcast_http_connections_refused_total by reason on
// n's /metrics: "node N source M".
func refusedMetric(t *testing.T, n *Node) string {
	t.Helper()
	code, body := do(t, "GET", n.URL()+"/metrics", "", "")
	if code != 200 {
		t.Fatalf("/metrics %d", code)
	}
	var out []string
	for _, reason := range []string{"node", "source"} {
		v := "missing"
		for _, line := range strings.Split(body, "\n") {
			if rest, ok := strings.CutPrefix(line, `threadcast_http_connections_refused_total{reason="`+reason+`"} `); ok {
				v = rest
			}
		}
		out = append(out, reason+" "+v)
	}
	return strings.Join(out, " ")
}

// TestNodeConnectionCapPerSource: over real HTTP, one source's idle
// connections at its per-source cap get the 503 refusal (counted as
// reason source) while a second source still connects and is served.
func TestNodeConnectionCapPerSource(t *testing.T) {
	c := testConfig(t)
	c.MaxConns, c.MaxConnsPerSource = 8, 2
	n, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	status := func(conn net.Conn) string {
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.WriteString(conn, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return "write: " + err.Error()
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return "read: " + err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.Status + " " + strings.TrimSpace(string(body))
	}
	// The first source, 127.0.0.2 (loopback on Linux, as all of
	// 127.0.0.0/8), holds its cap in idle keep-alive connections.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	dial := func() net.Conn {
		conn, err := d.Dial("tcp", n.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	for range 2 {
		if got := status(dial()); !strings.HasPrefix(got, "200 OK") {
			t.Fatalf("within the source's cap: %s", got)
		}
	}
	if got := status(dial()); got != `503 Service Unavailable {"error":"too_many_connections"}` {
		t.Fatalf("past the source's cap: %s", got)
	}
	// The second source, 127.0.0.1, is served: over new connections, well
	// within the node's cap.
	for range 3 {
		tr := &http.Transport{DisableKeepAlives: true}
		res, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(n.URL() + "/livez")
		if err != nil {
			t.Fatalf("the second source, while the first is at its cap: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("the second source, while the first is at its cap: %s", res.Status)
		}
	}
	capped := n.Listener().(*connlimit.Listener)
	if capped.RefusedBy(connlimit.BySource) != 1 || capped.RefusedBy(connlimit.ByNode) != 0 {
		t.Errorf("refused by source %d, by node %d; want 1, 0", capped.RefusedBy(connlimit.BySource), capped.RefusedBy(connlimit.ByNode))
	}
	if got := refusedMetric(t, n); got != "node 0 source 1" {
		t.Errorf("refusals counted by reason: %s, want node 0 source 1", got)
	}
}
