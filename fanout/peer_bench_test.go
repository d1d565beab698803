package fanout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/threadcast/threadcast/internal/testsupport/natstest"
)

// NOTE: the fan-out against a real peer. Centrifugo v6 (its own process,
// default configuration but for what a loopback benchmark needs: anonymous
// clients, which may then ask for server-side subscriptions in their connect
// request, and the HTTP API without a key) against Threadcast's fanout, one
// busy channel/thread, n subscribers, over SSE (Centrifugo's uni_sse) and
// WebSocket (Centrifugo's uni_websocket), the same clients code and the same
// 256-byte events as BenchmarkFanoutSSE. Both sides are fan-out only, and
// each server runs in a process of its own, apart from the clients and the
// publisher (this process): Threadcast as TestPeerServerProcess, the fanout
// with an embedded NATS server, served as cmd/threadcast serves it, its
// frames published on core NATS to the hub as the ingest does; Centrifugo
// with its publications sent through its HTTP API (batched: the publisher
// sends every frame queued since its last request in one /api/batch call,
// in order, as a Centrifugo user with a busy channel would). Each server's
// CPU time per delivery is read from /proc (server_cpu), and this process's
// (client_cpu: the clients and the publisher) from getrusage.
//
// For each n and transport:
//
//	max:   the closed loop of drive (frame i is published once every client
//	       has read frame i-w): the rate at which the server delivers every
//	       frame to every subscriber with a backlog of at most w frames;
//	       drive fails the run if any delivery is missing, so "sustained"
//	       means 100% delivered and nobody dropped. Rounds alternate the
//	       servers, each at every window w of peerWindows; each server's
//	       best run counts (tc_window, cf_window: its window), and the best
//	       at the narrowest window is reported too (narrow_*).
//	light: both offered the same fixed open-loop rate, lightDeliveries/s.
//	peer:  both offered 90% of Centrifugo's max: latency at the same load,
//	       near the peer's ceiling.
//
// Each open-loop figure pools latencyRounds runs of each server, which
// take turns to go first.
//
// Centrifugo is found at $THREADCAST_CENTRIFUGO, else $GOPATH/bin/centrifugo
// (go install github.com/centrifugal/centrifugo/v6@v6.9.1; `go run ./bench
// -only peer` installs it there); without it the benchmark is skipped. Run:
//
//	go test ./fanout -run '^$' -bench BenchmarkFanoutPeer -benchtime 300x -timeout 60m
//
// One op is one frame to 5,000 subscribers' worth of deliveries: a run of
// -benchtime Kx publishes K·5000/n frames, so every n delivers the same
// K·5,000 messages.
func BenchmarkFanoutPeer(b *testing.B) {
	bin := centrifugoBinary(b)
	for _, n := range []int{100, 1000, 5000} {
		for _, tr := range []string{"sse", "ws"} {
			b.Run(fmt.Sprintf("subs=%d/%s", n, tr), func(b *testing.B) {
				if b.N < 20 {
					return // the probe run; use -benchtime 300x
				}
				frames := b.N * max(1, 5000/n)
				var cf, tc, cfNarrow, tcNarrow benchResult
				for r := 0; r < benchRounds; r++ {
					for _, w := range peerWindows {
						c := runCentrifugo(b, bin, tr, n, frames, 0, w)
						t := runThreadcastProcess(b, tr, n, frames, 0, w)
						cf, tc = cf.best(c), tc.best(t)
						if w == peerWindows[0] {
							cfNarrow, tcNarrow = cfNarrow.best(c), tcNarrow.best(t)
						}
					}
				}
				// The open-loop runs alternate which server goes first,
				// and pool their rounds: a run's p99 is made by its few
				// slowest frames, and the machine drifts between runs.
				openLoop := func(deliveries float64) (centrifugo, threadcast benchResult) {
					pace, frames := pacing(n, deliveries), max(20, int(latencySeconds*deliveries)/n)
					var cfs, tcs []benchResult
					for r := 0; r < latencyRounds; r++ {
						if r%2 == 0 {
							cfs = append(cfs, runCentrifugo(b, bin, tr, n, frames, pace, 0))
						}
						tcs = append(tcs, runThreadcastProcess(b, tr, n, frames, pace, 0))
						if r%2 == 1 {
							cfs = append(cfs, runCentrifugo(b, bin, tr, n, frames, pace, 0))
						}
					}
					return pooled(cfs), pooled(tcs)
				}
				cfLight, tcLight := openLoop(lightDeliveries)
				cfPeer, tcPeer := openLoop(0.9 * cf.rate)

				b.ReportMetric(tc.rate, "tc_deliv/s")
				b.ReportMetric(cf.rate, "cf_deliv/s")
				b.ReportMetric(tc.rate/cf.rate, "ratio")
				b.ReportMetric(float64(tc.window), "tc_window")
				b.ReportMetric(float64(cf.window), "cf_window")
				b.ReportMetric(tcNarrow.rate, "narrow_tc_deliv/s")
				b.ReportMetric(cfNarrow.rate, "narrow_cf_deliv/s")
				b.ReportMetric(tcNarrow.rate/cfNarrow.rate, "narrow_ratio")
				b.ReportMetric(tc.srvCPU, "tc_server_cpu_ns/deliv")
				b.ReportMetric(cf.srvCPU, "cf_server_cpu_ns/deliv")
				b.ReportMetric(tc.cpu, "tc_client_cpu_ns/deliv")
				b.ReportMetric(cf.cpu, "cf_client_cpu_ns/deliv")
				b.ReportMetric(tc.p50, "max_tc_p50_µs")
				b.ReportMetric(tc.p99, "max_tc_p99_µs")
				b.ReportMetric(cf.p50, "max_cf_p50_µs")
				b.ReportMetric(cf.p99, "max_cf_p99_µs")
				b.ReportMetric(tcLight.p50, "light_tc_p50_µs")
				b.ReportMetric(tcLight.p99, "light_tc_p99_µs")
				b.ReportMetric(cfLight.p50, "light_cf_p50_µs")
				b.ReportMetric(cfLight.p99, "light_cf_p99_µs")
				b.ReportMetric(tcLight.srvCPU, "light_tc_server_cpu_ns/deliv")
				b.ReportMetric(cfLight.srvCPU, "light_cf_server_cpu_ns/deliv")
				b.ReportMetric(0.9*cf.rate, "peer_offered_deliv/s")
				b.ReportMetric(tcPeer.rate, "peer_tc_deliv/s")
				b.ReportMetric(cfPeer.rate, "peer_cf_deliv/s")
				b.ReportMetric(tcPeer.p50, "peer_tc_p50_µs")
				b.ReportMetric(tcPeer.p99, "peer_tc_p99_µs")
				b.ReportMetric(cfPeer.p50, "peer_cf_p50_µs")
				b.ReportMetric(cfPeer.p99, "peer_cf_p99_µs")
			})
		}
	}
}

// peerWindows are the closed loop's windows, in frames: a server's
// maximum is its best rate over them. The narrowest keeps the backlog
// small but leaves both servers idle part of the time (every frame waits
// for the slowest client to read the one a window before it, a round trip
// through both processes) and caps what one socket write can carry at a
// window's frames; the wider ones measure what each server sustains once
// the loop no longer limits it. Each is well within both servers' queues
// (128 frames of 256-byte events: 40 KB a subscriber).
var peerWindows = []int{8, 32, 128}

// latencySeconds is how long each open-loop run (light, peer) lasts, and
// latencyRounds how many of them a server's latency pools, the servers
// taking turns to go first: long enough that one hiccup of either process
// does not make the p99.
const (
	latencySeconds = 10
	latencyRounds  = 2
)

// lightDeliveries is the fixed light load, in deliveries per second summed
// over the subscribers.
const lightDeliveries = 20000

// pacing returns the interval between frames that offers n subscribers
// deliveries/s in all.
func pacing(n int, deliveries float64) time.Duration {
	return time.Duration(float64(n) / deliveries * float64(time.Second))
}

func centrifugoBinary(b *testing.B) string {
	bin := os.Getenv("THREADCAST_CENTRIFUGO")
	if bin == "" {
		gopath, err := exec.Command("go", "env", "GOPATH").Output()
		if err == nil {
			bin = filepath.Join(string(bytes.TrimSpace(gopath)), "bin", "centrifugo")
		}
	}
	if _, err := os.Stat(bin); bin == "" || err != nil {
		b.Skipf("Centrifugo not found (%q): go install github.com/centrifugal/centrifugo/v6@v6.9.1, or set THREADCAST_CENTRIFUGO", bin)
	}
	return bin
}

// centrifugo is one Centrifugo process on a free loopback port.
type centrifugo struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

func startCentrifugo(b *testing.B, bin string) *centrifugo {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := map[string]any{
		"http_server":   map[string]any{"address": "127.0.0.1", "port": port},
		"log":           map[string]any{"level": "error"},
		"client":        map[string]any{"insecure": true, "allowed_origins": []string{"*"}},
		"http_api":      map[string]any{"insecure": true},
		"uni_sse":       map[string]any{"enabled": true},
		"uni_websocket": map[string]any{"enabled": true},
		"usage_stats":   map[string]any{"disabled": true},
	}
	dir := b.TempDir()
	path := filepath.Join(dir, "config.json")
	raw, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", path)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &centrifugo{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	waitCond(b, "centrifugo listening", func() bool {
		select {
		case <-c.done:
			b.Fatalf("centrifugo exited: %v", cmd.ProcessState)
		default:
		}
		conn, err := net.Dial("tcp", c.addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return c
}

func (c *centrifugo) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// centrifugoPublisher publishes frames through Centrifugo's HTTP API: one
// goroutine sends everything queued since its last request as one ordered
// /api/batch call.
type centrifugoPublisher struct {
	url     string
	hc      *http.Client
	mu      sync.Mutex
	pending [][]byte
	wake    chan struct{}
	done    chan struct{}
	err     error
}

func newCentrifugoPublisher(addr string) *centrifugoPublisher {
	p := &centrifugoPublisher{
		url:  "http://" + addr + "/api/batch",
		hc:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}},
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	go p.loop()
	return p
}

func (p *centrifugoPublisher) publish(ev []byte) {
	p.mu.Lock()
	p.pending = append(p.pending, ev)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *centrifugoPublisher) loop() {
	defer close(p.done)
	var body bytes.Buffer
	for range p.wake {
		if !p.send(&body) {
			return
		}
	}
	p.send(&body) // what was queued before close
}

// send posts everything queued as one batch and reports whether it went.
func (p *centrifugoPublisher) send(body *bytes.Buffer) bool {
	p.mu.Lock()
	batch := p.pending
	p.pending = nil
	p.mu.Unlock()
	if len(batch) == 0 {
		return true
	}
	body.Reset()
	body.WriteString(`{"commands":[`)
	for i, ev := range batch {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString(`{"publish":{"channel":"busy","data":`)
		body.Write(ev)
		body.WriteString(`}}`)
	}
	body.WriteString(`]}`)
	resp, err := p.hc.Post(p.url, "application/json", bytes.NewReader(body.Bytes()))
	if err == nil {
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("centrifugo API: %s", resp.Status)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		p.err = err
		return false
	}
	return true
}

// close stops the publisher once everything queued is sent. No publish may
// follow it.
func (p *centrifugoPublisher) close() error {
	close(p.wake)
	<-p.done
	p.hc.CloseIdleConnections()
	return p.err
}

func runCentrifugo(b *testing.B, bin, transport string, n, frames int, pace time.Duration, window int) benchResult {
	cf := startCentrifugo(b, bin)
	defer cf.stop()
	connect := url.QueryEscape(`{"subs":{"busy":{}}}`)
	var c *benchClients
	if transport == "ws" {
		c = dialWSClients(b, cf.addr, "/connection/uni_websocket?cf_connect="+connect, n, frames)
	} else {
		c = dialClients(b, cf.addr, "/connection/uni_sse?cf_connect="+connect, "", n, frames)
	}
	defer c.close()
	// The first message of each connection is Centrifugo's connect reply,
	// sent once its server-side subscription is in place.
	c.waitSubscribed(b, "centrifugo subscribers", n, func() int { return int(c.seen.Load()) })
	pub := newCentrifugoPublisher(cf.addr)
	b.ResetTimer()
	r := driveServer(b, cf.cmd.Process.Pid, c, n, frames, pace, window, func(i int) {
		pub.publish(benchEvent(i, time.Now().UnixNano()))
	})
	if err := pub.close(); err != nil {
		b.Fatal(err)
	}
	return r
}

// peerServerEnv makes TestPeerServerProcess serve: it is how
// BenchmarkFanoutPeer runs Threadcast in a process of its own, as
// Centrifugo runs, rather than in the benchmark's process, whose Go
// scheduler and two Ps it would share with the clients.
const peerServerEnv = "THREADCAST_PEER_SERVER"

// TestPeerServerProcess is Threadcast's side of BenchmarkFanoutPeer when
// $THREADCAST_PEER_SERVER is set (it skips otherwise): an embedded NATS
// server (core NATS), the fanout with benchConfig, served by Server.Serve as
// cmd/threadcast serves it, and GET /bench/subscribers?variant=V, the
// subscriber gauge. It prints "peer-server http=ADDR nats=URL" and serves
// until its standard input closes.
func TestPeerServerProcess(t *testing.T) {
	if os.Getenv(peerServerEnv) == "" {
		t.Skip("BenchmarkFanoutPeer's server process; it sets " + peerServerEnv)
	}
	ns := natstest.Start(t, natstest.NoJetStream)
	srv, err := New(connect(t, ns), benchConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", srv.Handler())
	mux.HandleFunc("GET /bench/subscribers", func(w http.ResponseWriter, r *http.Request) {
		for _, v := range []Variant{AguiSSE, AguiWS} {
			if r.URL.Query().Get("variant") == v.String() {
				fmt.Fprint(w, counterValue(srv.m.Subscribers.WithLabelValues(v.String())))
				return
			}
		}
		http.Error(w, "unknown variant", http.StatusBadRequest)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, mux, 5*time.Second) }()
	fmt.Printf("peer-server http=%s nats=%s\n", ln.Addr(), ns.ClientURL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// tcProcess is TestPeerServerProcess running in a child process.
type tcProcess struct {
	http, nats string
	cmd        *exec.Cmd
	stdin      io.Closer
	done       chan struct{}
}

func startThreadcastProcess(b *testing.B) *tcProcess {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestPeerServerProcess$")
	cmd.Env = append(os.Environ(), peerServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &tcProcess{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	addrs := make(chan [2]string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var a [2]string
			if _, err := fmt.Sscanf(sc.Text(), "peer-server http=%s nats=%s", &a[0], &a[1]); err == nil {
				addrs <- a
				continue
			}
			fmt.Fprintln(os.Stderr, sc.Text())
		}
		_ = cmd.Wait()
	}()
	select {
	case a := <-addrs:
		p.http, p.nats = a[0], a[1]
	case <-p.done:
		b.Fatalf("threadcast server process exited: %v", cmd.ProcessState)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		b.Fatal("threadcast server process did not start")
	}
	return p
}

func (p *tcProcess) subscribers(b *testing.B, v Variant) int {
	resp, err := http.Get("http://" + p.http + "/bench/subscribers?variant=" + v.String())
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var n float64
	if _, err := fmt.Fscan(resp.Body, &n); err != nil {
		b.Fatal(err)
	}
	return int(n)
}

func (p *tcProcess) stop() {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// runThreadcastProcess is runThreadcastOver with the fanout in a process
// of its own (TestPeerServerProcess), fed over NATS by this one.
func runThreadcastProcess(b *testing.B, transport string, n, frames int, pace time.Duration, window int) benchResult {
	p := startThreadcastProcess(b)
	defer p.stop()
	pub := natstest.Connect(b, p.nats)
	defer pub.Close()
	feed := newBenchFeed(b, pub)
	defer feed.close()
	c := dialThreadcast(b, p.http, transport, n, frames)
	defer c.close()
	c.waitSubscribed(b, "threadcast subscribers", n, func() int { return p.subscribers(b, benchVariant(transport)) })
	b.ResetTimer()
	return driveServer(b, p.cmd.Process.Pid, c, n, frames, pace, window, feed.publish)
}

// driveServer is drive with the CPU time of the server's process pid per
// delivery (srvCPU).
func driveServer(b *testing.B, pid int, c *benchClients, n, frames int, pace time.Duration, window int, publish func(i int)) benchResult {
	cpu0 := procCPU(b, pid)
	r := drive(b, c, n, frames, pace, window, publish)
	r.srvCPU = float64((procCPU(b, pid) - cpu0).Nanoseconds()) / float64(n*frames)
	return r
}

// procCPU returns the user+system CPU time process pid has used
// (/proc/PID/stat, in the kernel's clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// dialWSClients is dialClients over WebSocket: n readers of path on addr,
// raw like the SSE readers (the handshake and frame parsing by hand; a
// library reader would tax the shared cores more than the servers under
// test). Server frames are read whole; pings are answered.
func dialWSClients(b *testing.B, addr, path string, n, frames int) *benchClients {
	req := "GET " + path + " HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	return dialRaw(b, addr, req, n, frames, (*benchClients).readWS)
}

func (c *benchClients) readWS(k int, conn net.Conn) {
	defer c.wg.Done()
	br := bufio.NewReaderSize(conn, 16<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		c.refuse(resp, err)
		return
	}
	var msg []byte
	first := true
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return
		}
		fin, op, size := h[0]&0x80 != 0, h[0]&0x0f, uint64(h[1]&0x7f)
		switch size {
		case 126:
			var ext [2]byte
			if _, err := io.ReadFull(br, ext[:]); err != nil {
				return
			}
			size = uint64(binary.BigEndian.Uint16(ext[:]))
		case 127:
			var ext [8]byte
			if _, err := io.ReadFull(br, ext[:]); err != nil {
				return
			}
			size = binary.BigEndian.Uint64(ext[:])
		}
		start := len(msg)
		msg = slices.Grow(msg, int(size))[:start+int(size)]
		if _, err := io.ReadFull(br, msg[start:]); err != nil {
			return
		}
		switch {
		case op == 0x8: // close
			return
		case op == 0x9: // ping: a masked pong with the same payload (mask 0)
			pong := append([]byte{0x8a, 0x80 | byte(size), 0, 0, 0, 0}, msg[start:]...)
			msg = msg[:start]
			if _, err := conn.Write(pong); err != nil {
				return
			}
			continue
		case op >= 0x8: // another control frame
			msg = msg[:start]
			continue
		}
		if !fin {
			continue // a fragment: the rest follows
		}
		if first {
			first = false
			c.seen.Add(1)
		}
		// A message may join several pushes, one a line.
		for rest := msg; len(rest) > 0; {
			line := rest
			if j := bytes.IndexByte(rest, '\n'); j >= 0 {
				line, rest = rest[:j], rest[j+1:]
			} else {
				rest = nil
			}
			c.record(k, line)
		}
		msg = msg[:0]
	}
}
