package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/node"
)

// The serve tests run the binary TestMain built with `go build` from this
// checkout, as real processes on free ports, and talk to them over real
// HTTP.

// syncBuf is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// server is a running `threadcast serve` process.
type server struct {
	cmd    *exec.Cmd
	url    string            // from "listening on <url>"
	tokens map[string]string // development tokens by tenant ("dev token:" lines)
	dash   string            // the dashboard line's URL
	stdout *syncBuf
	stderr *syncBuf
	exited chan struct{} // closed when the process has exited
	code   int           // its exit code, once exited is closed
}

// startServer starts the binary with args (plus free ports unless args
// name them) and waits until it has printed its URL.
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	s := &server{cmd: cmd, tokens: map[string]string{}, stdout: &syncBuf{}, stderr: &syncBuf{}, exited: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(io.TeeReader(out, s.stdout))
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	go func() {
		for range lines { // keep draining: the process must never block on stdout
		}
		err := cmd.Wait()
		s.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			s.code = ee.ExitCode()
		} else if err != nil {
			s.code = -1
		}
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = cmd.Process.Kill()
			<-s.exited
		}
	})
	testsupport.WaitFor(t, 60*time.Second, "the listening line", func() bool {
		select {
		case <-s.exited:
			t.Fatalf("exited with %d before listening\nstdout:\n%s\nstderr:\n%s", s.code, s.stdout, s.stderr)
		default:
		}
		return strings.Contains(s.stdout.String(), "listening on ")
	})
	// The dashboard and token lines are printed right after the URL.
	testsupport.WaitFor(t, 10*time.Second, "the printed lines", func() bool {
		return strings.Contains(s.stdout.String(), "dashboard:")
	})
	for _, l := range strings.Split(s.stdout.String(), "\n") {
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, "listening on ") && len(f) == 3:
			s.url = f[2]
		case strings.HasPrefix(l, "dev token:") && len(f) == 4:
			s.tokens[f[2]] = f[3]
		case strings.HasPrefix(l, "dashboard:") && len(f) >= 2:
			s.dash = f[1]
		}
	}
	if s.url == "" {
		t.Fatalf("no URL in %q", s.stdout)
	}
	return s
}

// stop sends SIGTERM and returns the exit code, failing after bound.
func (s *server) stop(t *testing.T, bound time.Duration) int {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
		return s.code
	case <-time.After(bound):
		t.Fatalf("no exit within %v of SIGTERM\nstderr:\n%s", bound, s.stderr)
		return 0
	}
}

// get fetches path with token (if any); the body is returned.
func (s *server) get(t *testing.T, path, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.url+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

type threadList struct {
	Threads []struct {
		Thread string `json:"thread"`
	} `json:"threads"`
}

// threads lists the tenant's threads.
func (s *server) threads(t *testing.T, token string) []string {
	t.Helper()
	code, b := s.get(t, "/v1/threads", token)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/threads: %d %s", code, b)
	}
	var l threadList
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("thread list %q: %v", b, err)
	}
	var ids []string
	for _, th := range l.Threads {
		ids = append(ids, th.Thread)
	}
	return ids
}

// freeDataDir returns a fresh data directory and the flags of a server
// that listens on free ports and keeps its data there.
func freeFlags(t *testing.T) (string, []string) {
	dir := filepath.Join(t.TempDir(), "data")
	return dir, []string{"--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--data", dir}
}

// TestServeFirstCommand is the README's first command from a clean
// checkout: built with `go build`, started with no subcommand (the
// defaults, but free ports and a fresh data directory), it gets ready,
// the demo agents' threads stream to an SSE subscriber holding the printed
// development token, and SIGTERM stops it cleanly: the open stream ends
// with its resume cursor, ingest drains, the exit code is 0.
func TestServeFirstCommand(t *testing.T) {
	dir, flags := freeFlags(t)
	s := startServer(t, nil, flags...)
	testsupport.WaitFor(t, 60*time.Second, "/readyz", func() bool {
		code, _ := s.get(t, "/readyz", "")
		return code == http.StatusOK
	})
	if code, b := s.get(t, "/livez", ""); code != http.StatusOK || string(b) != "ok\n" {
		t.Errorf("livez: %d %q", code, b)
	}
	if !strings.Contains(s.stdout.String(), "data:       "+dir) {
		t.Errorf("the data directory is not printed:\n%s", s.stdout)
	}

	// The printed tokens verify with the key kept in the data directory,
	// and the dashboard link carries the first one.
	key, created, err := node.LoadOrCreateKey(filepath.Join(dir, node.KeyFile))
	if err != nil || created {
		t.Fatalf("key file: created %v, %v", created, err)
	}
	if len(s.tokens) != 3 {
		t.Fatalf("dev tokens %v, want one per default demo tenant", s.tokens)
	}
	for tenant, tok := range s.tokens {
		c, err := auth.Verify(key, tok, time.Now())
		if err != nil || c.Tenant != tenant || !c.Can(auth.ScopeRead) || !c.Can(auth.ScopePublish) {
			t.Errorf("token of %s: %+v %v (want the read and publish scopes)", tenant, c, err)
		}
	}
	if want := s.url + "/#token=" + s.tokens["acme"]; s.dash != want {
		t.Errorf("dashboard URL %q, want %q", s.dash, want)
	}
	// The dashboard is served, and offers the development tenants.
	if code, b := s.get(t, "/", ""); code != http.StatusOK || !bytes.Contains(b, []byte("<html")) {
		t.Errorf("dashboard: %d %.100q", code, b)
	}
	if code, b := s.get(t, "/config.json", ""); code != http.StatusOK || !bytes.Contains(b, []byte(s.tokens["globex"])) {
		t.Errorf("dashboard config: %d %.200q", code, b)
	}

	// A demo thread appears in acme's list; its stream delivers frames.
	tok := s.tokens["acme"]
	var thread string
	testsupport.WaitFor(t, 60*time.Second, "a demo thread", func() bool {
		if ids := s.threads(t, tok); len(ids) > 0 {
			thread = ids[0]
		}
		return thread != ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/threads/"+url.PathEscape(thread)+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %s %s", res.Status, res.Header.Get("Content-Type"))
	}
	// Events are AG-UI JSON objects with a type; wait for several, then
	// stop the server while the stream is open.
	var types []string
	var endLine string
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() && len(types) < 5 {
		if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			var ev struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(d)), &ev); err != nil || ev.Type == "" {
				t.Fatalf("frame %q: %v", d, err)
			}
			types = append(types, ev.Type)
		}
	}
	if len(types) < 5 {
		t.Fatalf("stream ended after %v: %v", types, sc.Err())
	}
	if m := s.metrics(t); !strings.Contains(m, "threadcast_ingest_events_total{") || !strings.Contains(m, "threadcast_fanout_") || !strings.Contains(m, "go_goroutines") {
		t.Errorf("/metrics does not have every part:\n%.2000s", m)
	}

	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), ": end ") {
			endLine = sc.Text()
		}
	}
	if !strings.HasPrefix(endLine, ": end reason=shutdown after=") {
		t.Errorf("the stream did not end with a resume cursor (last end line %q)", endLine)
	}
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("no exit within 60s of SIGTERM\nstderr:\n%s", s.stderr)
	}
	if s.code != 0 {
		t.Fatalf("exit code %d\nstderr:\n%s", s.code, s.stderr)
	}
	logs := s.stderr.String()
	// The order of the shutdown, as the log tells it.
	last := -1
	for _, want := range []string{"shutting down", "demo agents stopped", "http stopped", "ingest drained", "embedded NATS server stopped", "stopped cleanly"} {
		i := strings.Index(logs, want)
		if i < 0 || i < last {
			t.Fatalf("log line %q missing or out of order (after %d)\n%s", want, last, logs)
		}
		last = i
	}
	if strings.Contains(logs, "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs)
	}
	t.Logf("stopped %v after SIGTERM; frames %v", time.Since(start).Round(time.Millisecond), types)
}

func (s *server) metrics(t *testing.T) string {
	t.Helper()
	code, b := s.get(t, "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("metrics: %d", code)
	}
	return string(b)
}

// TestServeRestartKeepsViewsAndKey: a second start on the same data
// directory (demo off) has the first run's threads and views, and accepts
// the first run's tokens (the key was kept).
func TestServeRestartKeepsViewsAndKey(t *testing.T) {
	dir, flags := freeFlags(t)
	s := startServer(t, nil, append(flags, "--demo-time-scale", "0.3")...)
	tok := s.tokens["acme"]
	views := map[string]int{} // thread → messages seen in the first run
	testsupport.WaitFor(t, 60*time.Second, "two acme threads with messages", func() bool {
		for _, id := range s.threads(t, tok) {
			if n := s.messages(t, tok, id); n > 0 {
				views[id] = n
			}
		}
		return len(views) >= 2
	})
	keyBefore, err := os.ReadFile(filepath.Join(dir, node.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if code := s.stop(t, 60*time.Second); code != 0 {
		t.Fatalf("first run exit %d\n%s", code, s.stderr)
	}

	s2 := startServer(t, nil, append(flags, "--demo=false")...)
	testsupport.WaitFor(t, 60*time.Second, "/readyz", func() bool {
		code, _ := s2.get(t, "/readyz", "")
		return code == http.StatusOK
	})
	keyAfter, err := os.ReadFile(filepath.Join(dir, node.KeyFile))
	if err != nil || !bytes.Equal(keyBefore, keyAfter) {
		t.Fatalf("key file changed across the restart (%v)", err)
	}
	have := map[string]bool{}
	for _, id := range s2.threads(t, tok) { // the first run's token
		have[id] = true
	}
	for id, n := range views {
		if !have[id] {
			t.Errorf("thread %s is not listed after the restart", id)
		}
		// The view holds at least what was seen before the stop (the demo
		// ended the open run with RUN_ERROR when it stopped).
		if got := s2.messages(t, tok, id); got < n {
			t.Errorf("thread %s: %d messages after the restart, %d before", id, got, n)
		}
	}
	if code := s2.stop(t, 60*time.Second); code != 0 {
		t.Fatalf("second run exit %d\n%s", code, s2.stderr)
	}
	if strings.Contains(s2.stderr.String(), "demo agents started") {
		t.Error("--demo=false ran the demo")
	}
}

// messages returns the number of messages in the thread's view (0 while
// it has none or is unknown).
func (s *server) messages(t *testing.T, token, thread string) int {
	t.Helper()
	code, b := s.get(t, "/v1/threads/"+url.PathEscape(thread), token)
	if code != http.StatusOK {
		return 0
	}
	var v struct {
		View struct {
			Messages []json.RawMessage `json:"messages"`
		} `json:"view"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("view of %s: %v", thread, err)
	}
	return len(v.View.Messages)
}

// TestServeStartupErrors: what cannot work is reported at once, naming
// the flag to change, with exit status 1 (environment) or 2 (usage).
func TestServeStartupErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	data := func() string { return filepath.Join(t.TempDir(), "data") }
	tests := []struct {
		name       string
		give       []string
		env        []string
		wantCode   int
		wantStderr []string
	}{
		{name: "HTTP port taken", give: []string{"--http", taken.Addr().String(), "--nats-listen", "127.0.0.1:0", "--data", data()},
			wantCode: exitRejected, wantStderr: []string{"cannot listen for HTTP", "address already in use", "--http"}},
		{name: "NATS port taken", give: []string{"serve", "--http", "127.0.0.1:0", "--nats-listen", taken.Addr().String(), "--data", data()},
			wantCode: exitRejected, wantStderr: []string{"cannot listen for NATS clients", "address already in use", "--nats-listen"}},
		{name: "data directory under a file", give: []string{"--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--data", filepath.Join(file, "data")},
			wantCode: exitRejected, wantStderr: []string{"data directory unusable", "not a directory", "--data"}},
		{name: "bad key file", give: []string{"--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--data", filepath.Dir(file)},
			wantCode: exitRejected, wantStderr: []string{"not a hex key", "--data"}},
		{name: "no NATS at --nats-url", give: []string{"--nats-url", "nats://" + taken.Addr().String(), "--auth-key", "0123456789abcdef", "--http", "127.0.0.1:0"},
			wantCode: exitRejected, wantStderr: []string{"node: NATS: connect", "--nats-url"}},
		{name: "unknown flag", give: []string{"serve", "--bogus"}, wantCode: exitUsage, wantStderr: []string{"flag provided but not defined: -bogus", "usage: threadcast [serve]"}},
		{name: "bad flag value", give: []string{"--demo=maybe"}, wantCode: exitUsage, wantStderr: []string{`invalid boolean value "maybe" for -demo`}},
		{name: "bad env value", env: []string{"THREADCAST_DRAIN=soon"}, wantCode: exitUsage, wantStderr: []string{"THREADCAST_DRAIN"}},
		{name: "extra arguments", give: []string{"serve", "now"}, wantCode: exitUsage, wantStderr: []string{`unexpected arguments ["now"]`}},
		{name: "external NATS needs a key", give: []string{"--nats-url", "nats://127.0.0.1:1"}, wantCode: exitUsage, wantStderr: []string{"--auth-key is required with --nats-url"}},
		{name: "JWKS without issuer", give: []string{"--jwks-file", "/x.json"}, wantCode: exitUsage, wantStderr: []string{"--issuer is required with --jwks-url or --jwks-file"}},
		{name: "JWKS URL and file", give: []string{"--jwks-file", "/x.json", "--jwks-url", "https://x/", "--issuer", "i"}, wantCode: exitUsage, wantStderr: []string{"give one"}},
		{name: "issuer without JWKS", give: []string{"--issuer", "i"}, wantCode: exitUsage, wantStderr: []string{"--issuer needs --jwks-url or --jwks-file"}},
		{name: "negative skew", give: []string{"--token-clock-skew", "-1s"}, wantCode: exitUsage, wantStderr: []string{"--token-clock-skew must not be negative"}},
		{name: "JWKS over plain http", give: []string{"--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--data", data(), "--jwks-url", "http://idp.example/jwks", "--issuer", "i"},
			wantCode: exitRejected, wantStderr: []string{"want https"}},
		{name: "JWKS unreachable", give: []string{"--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--data", data(), "--jwks-file", filepath.Join(t.TempDir(), "none.json"), "--issuer", "i"},
			wantCode: exitRejected, wantStderr: []string{"JWKS", "key set unavailable"}},
		{name: "short key", give: []string{"--auth-key", "short"}, wantCode: exitUsage, wantStderr: []string{"--auth-key must be at least 16 bytes"}},
		{name: "nothing to run", give: []string{"--ingest=false", "--fanout=false", "--demo=false"}, wantCode: exitUsage, wantStderr: []string{"nothing to run"}},
		{name: "bad tenant", give: []string{"--demo-tenants", "acme,Not A Tenant"}, wantCode: exitUsage, wantStderr: []string{"--demo-tenants"}},
		{name: "bad log level", give: []string{"--log-level", "loud"}, wantCode: exitUsage, wantStderr: []string{"--log-level"}},
		{name: "bad memory limit ratio", give: []string{"--memory-limit-ratio", "2"}, wantCode: exitUsage, wantStderr: []string{"--memory-limit-ratio: memlimit: ratio 2 is not between 0 and 1"}},
		{name: "connection cap over the fd limit", give: []string{"--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--data", data(), "--max-conns", "100000000"},
			wantCode: exitRejected, wantStderr: []string{"connection cap does not fit the file descriptor limit", "100000000 connections", "--max-conns"}},
		{name: "per-source cap over the connection cap", give: []string{"--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--data", data(), "--max-conns", "100", "--max-conns-per-source", "101"},
			wantCode: exitRejected, wantStderr: []string{"max connections per source", "per-source cap of 101 exceeds the node's cap of 100"}},
		{name: "bad partitions", give: []string{"--partitions", "0"}, wantCode: exitUsage, wantStderr: []string{"partitions 0"}},
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), node.KeyFile), []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary, tt.give...)
			cmd.Env = append(os.Environ(), tt.env...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			start := time.Now()
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstderr:\n%s", code, tt.wantCode, errb.String())
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, errb.String())
				}
			}
			// A start-up error is reported at once, not after a timeout.
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestServeHelp: --help documents every flag, on stdout, and exits 0; the
// top-level help lists serve and token.
func TestServeHelp(t *testing.T) {
	for _, args := range [][]string{{"serve", "--help"}, {"-h"}} {
		r := runCLI(t, nil, args...)
		if r.code != exitOK {
			t.Fatalf("%v: exit %d", args, r.code)
		}
		if args[0] == "-h" {
			for _, w := range []string{"serve", "token", "publish", "no subcommand: serve"} {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("%v: %q missing in\n%s", args, w, r.stdout)
				}
			}
			continue
		}
		var c serveConfig
		fs, _ := serveFlags(&c, func(string) string { return "" })
		n := 0
		fs.VisitAll(func(f *flag.Flag) {
			n++
			if !strings.Contains(r.stdout, "  -"+f.Name) {
				t.Errorf("flag -%s not in the help", f.Name)
			}
		})
		for _, w := range []string{"usage: threadcast [serve]", "THREADCAST_", "SIGTERM", "Exit status"} {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("help does not say %q", w)
			}
		}
		if n < 20 {
			t.Errorf("only %d flags", n)
		}
	}
}

// TestParseServe maps flags and environment onto the node's Config.
func TestParseServe(t *testing.T) {
	key := "0123456789abcdef"
	tests := []struct {
		name  string
		give  []string
		env   map[string]string
		check func(c serveConfig) error
	}{
		{name: "defaults: embedded, demo on, every part", check: func(c serveConfig) error {
			n := c.node
			if n.HTTP != "127.0.0.1:8080" || n.NatsURL != "" || n.NatsListen != "127.0.0.1:4222" || !n.Demo || !n.Ingest || !n.Fanout || c.authKeySet ||
				n.DataDir != "/xdg/threadcast" || n.DemoConfig.Seed == 0 || strings.Join(c.tenants, ",") != "acme,globex,initech" {
				return fmt.Errorf("%+v", c)
			}
			return nil
		}},
		{name: "external NATS: demo off, every interface", give: []string{"--nats-url", "nats://n:4222", "--auth-key", key}, check: func(c serveConfig) error {
			if c.node.Demo || c.node.NatsURL != "nats://n:4222" || string(c.node.AuthKey) != key || c.node.HTTP != ":8080" || len(c.node.Tokens.JWKS) != 0 {
				return fmt.Errorf("%+v", c.node)
			}
			return nil
		}},
		{name: "HTTP header bound", give: []string{"--http-max-header-bytes", "32768"}, check: func(c serveConfig) error {
			if c.node.HTTPMaxHeaderBytes != 32768 {
				return fmt.Errorf("header bound %d", c.node.HTTPMaxHeaderBytes)
			}
			return nil
		}},
		{name: "external NATS with --demo", give: []string{"--nats-url", "nats://n:4222", "--auth-key", key, "--demo"}, check: func(c serveConfig) error {
			if !c.node.Demo {
				return errors.New("demo off")
			}
			return nil
		}},
		{name: "env", env: map[string]string{"THREADCAST_DEMO": "false", "THREADCAST_HTTP": ":9", "THREADCAST_FANOUT": "false", "THREADCAST_DEMO_RATE": "50", "THREADCAST_DEMO_SEED": "7", "THREADCAST_DATA": "/d"},
			check: func(c serveConfig) error {
				n := c.node
				if n.Demo || n.HTTP != ":9" || n.Fanout || n.DemoConfig.Rate != 50 || n.DemoConfig.Seed != 7 || n.DataDir != "/d" {
					return fmt.Errorf("%+v", n)
				}
				return nil
			}},
		{name: "per-source cap", env: map[string]string{"THREADCAST_MAX_CONNS_PER_SOURCE": "64"}, check: func(c serveConfig) error {
			if c.node.MaxConnsPerSource != 64 {
				return fmt.Errorf("per-source cap %d, want 64", c.node.MaxConnsPerSource)
			}
			return nil
		}},
		{name: "per-source cap by default", check: func(c serveConfig) error {
			if c.node.MaxConnsPerSource != connlimit.AutoPerSource {
				return fmt.Errorf("per-source cap %d, want %d", c.node.MaxConnsPerSource, connlimit.AutoPerSource)
			}
			return nil
		}},
		{name: "flag over env", give: []string{"--demo", "--http", ":10"}, env: map[string]string{"THREADCAST_DEMO": "false", "THREADCAST_HTTP": ":9"},
			check: func(c serveConfig) error {
				if !c.node.Demo || c.node.HTTP != ":10" {
					return fmt.Errorf("%+v", c.node)
				}
				return nil
			}},
		{name: "fanout idle bounds", give: []string{"--max-idle-threads-per-tenant", "7"},
			env: map[string]string{"THREADCAST_MAX_IDLE_THREADS": "70", "THREADCAST_IDLE_RING_BYTES": "2048", "THREADCAST_IDLE_TRIM_AFTER": "4s"},
			check: func(c serveConfig) error {
				if h := c.node.FanoutConfig.Hub; h.MaxIdleFeedsPerTenant != 7 || h.MaxIdleFeeds != 70 || h.IdleRingBytes != 2048 || h.IdleTrimAfter != 4*time.Second {
					return fmt.Errorf("%+v", h)
				}
				return nil
			}},
		{name: "external NATS with a JWKS instead of a key", give: []string{"--nats-url", "nats://n:4222", "--jwks-url", "https://idp.example/jwks.json", "--issuer", "https://idp.example/",
			"--audience", "threadcast", "--token-clock-skew", "5s", "--jwks-min-interval", "1m", "--jwks-refresh", "1h"}, check: func(c serveConfig) error {
			tk := c.node.Tokens
			if len(c.node.AuthKey) != 0 || len(tk.JWKS) != 1 || tk.JWKS[0] != (auth.JWKSSource{Issuer: "https://idp.example/", URL: "https://idp.example/jwks.json"}) ||
				tk.Audience != "threadcast" || tk.ClockSkew != 5*time.Second || tk.MinRefreshInterval != time.Minute || tk.RefreshInterval != time.Hour {
				return fmt.Errorf("%+v", tk)
			}
			return nil
		}},
		{name: "JWKS file from the environment", env: map[string]string{"THREADCAST_JWKS_FILE": "/etc/threadcast/jwks.json", "THREADCAST_ISSUER": "acme-idp"}, check: func(c serveConfig) error {
			if tk := c.node.Tokens; len(tk.JWKS) != 1 || tk.JWKS[0] != (auth.JWKSSource{Issuer: "acme-idp", File: "/etc/threadcast/jwks.json"}) {
				return fmt.Errorf("%+v", tk)
			}
			return nil
		}},
		{name: "tenants", give: []string{"--demo-tenants", " a1, b2 ,", "--demo-agents", "4"}, check: func(c serveConfig) error {
			if strings.Join(c.node.DemoConfig.Tenants, ",") != "a1,b2" || c.node.DemoConfig.Agents != 4 {
				return fmt.Errorf("%+v", c.node.DemoConfig)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "XDG_DATA_HOME" {
					return "/xdg"
				}
				return tt.env[k]
			}
			c, err := parseServe(tt.give, getenv)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.check(c); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestDefaultDataDir(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_DATA_HOME": "/x", "HOME": "/h"}, "/x/threadcast"},
		{map[string]string{"HOME": "/h"}, "/h/.local/share/threadcast"},
		{nil, "threadcast-data"},
	}
	for _, tt := range tests {
		if got := defaultDataDir(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.env, got, tt.want)
		}
	}
}

// TestPrepareServe: what the data directory provides in each mode — a
// generated key and development tokens only when embedded without
// --auth-key.
func TestPrepareServe(t *testing.T) {
	key := "0123456789abcdef"
	tests := []struct {
		name        string
		give        []string
		wantKeyFile bool
		wantTokens  int
		wantPrinted string
	}{
		{name: "embedded, generated key", wantKeyFile: true, wantTokens: 3, wantPrinted: "data:       "},
		{name: "embedded, given key", give: []string{"--auth-key", key}, wantPrinted: "data:       "},
		{name: "embedded, generated key, an audience", give: []string{"--audience", "threadcast"}, wantKeyFile: true, wantTokens: 3, wantPrinted: "data:       "},
		{name: "external NATS", give: []string{"--nats-url", "nats://127.0.0.1:1", "--auth-key", key}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			c, err := parseServe(append(tt.give, "--data", dir), func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			dev, err := prepareServe(&c, &out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.String(), tt.wantPrinted) || (tt.wantPrinted == "") != (out.Len() == 0) {
				t.Errorf("printed %q", out.String())
			}
			_, statErr := os.Stat(filepath.Join(dir, node.KeyFile))
			if (statErr == nil) != tt.wantKeyFile {
				t.Errorf("key file: %v", statErr)
			}
			if len(dev) != tt.wantTokens || len(c.node.DashboardTenants) != tt.wantTokens {
				t.Fatalf("%d tokens, %d dashboard tenants, want %d", len(dev), len(c.node.DashboardTenants), tt.wantTokens)
			}
			// The node verifies them as the server will: its token
			// settings (an --audience among them) and the key.
			vc := c.node.Tokens
			vc.SharedKeys = [][]byte{c.node.AuthKey}
			v, err := auth.NewVerifier(vc)
			if len(dev) > 0 && err != nil {
				t.Fatal(err)
			}
			for i, d := range dev {
				cl, err := v.Verify(context.Background(), d.Token)
				if err != nil || cl.Tenant != c.tenants[i] || cl.Expiry < time.Now().Add(c.devTokenTTL-time.Minute).Unix() {
					t.Errorf("token %d: %+v %v", i, cl, err)
				}
			}
			if tt.name == "external NATS" {
				if _, err := os.Stat(dir); err == nil {
					t.Error("the data directory was created for an external NATS")
				}
			}
		})
	}
}

func TestEveryInterfaceNote(t *testing.T) {
	for addr, want := range map[string]bool{"[::]:8080": true, "0.0.0.0:8080": true, ":8080": true, "127.0.0.1:8080": false, "[::1]:8080": false, "192.0.2.1:8080": false} {
		if got := everyInterface(addr) != ""; got != want {
			t.Errorf("%s: note %v, want %v", addr, got, want)
		}
	}
}
