package fanout

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/threadcast/threadcast/wire"
)

// NOTE: the fan-out benchmark. One busy thread, n SSE subscribers on
// loopback, every frame one AG-UI event whose SSE message is 256 bytes.
// Two servers are measured in the same run, one after the other, with the
// same clients code and the same bytes on the wire:
//
//	naive:      a plain net/http SSE broadcaster — a goroutine per client,
//	            a channel per client, Write+Flush per message — fed
//	            in-process (no NATS).
//	bare:       the same, but writing everything already queued before
//	            each Flush: the ceiling the ratio is computed against.
//	threadcast: frames published on NATS, through the hub and the pump.
//
// The publisher runs a closed loop: frame i is sent once every client has
// received frame i-window, so both servers run at their own saturation rate
// with the same bounded backlog, and deliveries/s is frames·n/elapsed.
// Because the machine is shared, the rounds alternate the servers and each
// reports its best round, and CPU time per delivery is reported too. A
// closed loop with a small window is also bound by each server's latency,
// so a last pair of runs offers both servers the same open-loop rate (70%
// of the ceiling's closed-loop rate) and reports their latency at it
// ("at70_*"): the "p99 no worse than the ceiling's at the same rate".
// Latency is publish → client read (the client parses the publish time
// from the event). Run:
//
//	go test ./fanout -run '^$' -bench BenchmarkFanoutSSE -benchtime 300x -timeout 30m
//
// Measured 2026-11-29 on the 2-core build machine while other engineers'
// tests ran (load average ≈ 10), 300 frames, best of 2 rounds:
//
//	subs  bare (batched)        threadcast            ratio  CPU/delivery bare/tc
//	1000  181k/s p99  74 ms     197k/s p99  60 ms     1.09   2.38/2.38 µs
//	5000  115k/s p99 781 ms     152k/s p99 462 ms     1.32   3.83/3.01 µs
//	naive Write+Flush per message: 81k/s (1000), 51k/s (5000)
//	at 70% of bare's rate: 1000: p99 bare 202 ms, tc 151 ms; 5000: 1106 vs 986 ms
//
// A later run (load average ≈ 16, final code):
//
//	1000  117k/s p99 123 ms     120k/s p99 208 ms     1.03   3.03/2.90 µs
//	5000   91k/s p99 557 ms     154k/s p99 475 ms     1.70   4.84/3.03 µs
//	at 70%: 1000: p99 bare 234 ms, tc 150 ms; 5000: 1080 vs 1091 ms (both kept up)
//
// Wall-clock rates moved by ±40% between runs under that load; the CPU
// cost per delivery moved far less.

const (
	benchMsgSize = 256
	benchWindow  = 8
)

func BenchmarkFanoutSSE(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			if b.N < 20 {
				// The probe run (b.N = 1) and too short runs measure
				// nothing; use -benchtime 200x (one op = one frame to all).
				return
			}
			// Rounds interleave the servers, so that load from outside the
			// benchmark (this machine is shared) hits both alike; each
			// server's best round is its capacity estimate.
			b.ReportAllocs()
			var naive, bare, tc benchResult
			for r := 0; r < benchRounds; r++ {
				naive = naive.best(runBare(b, n, b.N, false, 0))
				bare = bare.best(runBare(b, n, b.N, true, 0))
				tc = tc.best(runThreadcast(b, n, b.N, 0))
			}
			// Then both at the same offered rate, 70% of the ceiling's
			// capacity: p99 side by side, and whether each kept up.
			pace := time.Duration(float64(n) / (0.7 * bare.rate) * float64(time.Second))
			bareAt := runBare(b, n, b.N, true, pace)
			tcAt := runThreadcast(b, n, b.N, pace)
			b.ReportMetric(0.7*bare.rate, "at70_offered_deliv/s")
			b.ReportMetric(bareAt.rate, "at70_bare_deliv/s")
			b.ReportMetric(tcAt.rate, "at70_tc_deliv/s")
			b.ReportMetric(bareAt.p50, "at70_bare_p50_µs")
			b.ReportMetric(bareAt.p99, "at70_bare_p99_µs")
			b.ReportMetric(tcAt.p50, "at70_tc_p50_µs")
			b.ReportMetric(tcAt.p99, "at70_tc_p99_µs")
			b.ReportMetric(naive.rate, "naive_deliv/s")
			b.ReportMetric(naive.p50, "naive_p50_µs")
			b.ReportMetric(naive.p99, "naive_p99_µs")
			b.ReportMetric(bare.rate, "bare_deliv/s")
			b.ReportMetric(tc.rate, "tc_deliv/s")
			b.ReportMetric(tc.rate/bare.rate, "ratio")
			b.ReportMetric(bare.cpu, "bare_cpu_ns/deliv")
			b.ReportMetric(tc.cpu, "tc_cpu_ns/deliv")
			b.ReportMetric(bare.cpu/tc.cpu, "cpu_ratio")
			b.ReportMetric(bare.p50, "bare_p50_µs")
			b.ReportMetric(bare.p99, "bare_p99_µs")
			b.ReportMetric(tc.p50, "tc_p50_µs")
			b.ReportMetric(tc.p99, "tc_p99_µs")
		})
	}
}

// benchResult is one measured run. cpu is the process's user+system CPU
// time per delivery (servers and clients together): unlike wall-clock
// rates it barely moves when other processes load the machine.
// srvCPU is the same for a server in a process of its own (procCPU).
// window is the closed loop's window (drive), 0 in an open loop. lat
// holds the run's latencies, sorted (pooled pools them).
type benchResult struct {
	rate, p50, p99, cpu, srvCPU float64
	window                      int
	lat                         []int64
}

// pooled is one result of several runs of the same load: their latencies
// pooled, their rates and CPU costs averaged.
func pooled(rs []benchResult) benchResult {
	var p benchResult
	for _, r := range rs {
		p.lat = append(p.lat, r.lat...)
		p.rate += r.rate / float64(len(rs))
		p.cpu += r.cpu / float64(len(rs))
		p.srvCPU += r.srvCPU / float64(len(rs))
	}
	slices.Sort(p.lat)
	p.p50 = float64(p.lat[len(p.lat)/2]) / 1e3
	p.p99 = float64(p.lat[len(p.lat)*99/100]) / 1e3
	return p
}

// best keeps the round with the higher rate, and the lower CPU costs of
// the rounds at its window.
func (r benchResult) best(o benchResult) benchResult {
	if o.window != r.window {
		if o.rate > r.rate {
			return o
		}
		return r
	}
	low := func(a, b float64) float64 {
		if a > 0 && a < b {
			return a
		}
		return b
	}
	cpu, srvCPU := low(r.cpu, o.cpu), low(r.srvCPU, o.srvCPU)
	if o.rate > r.rate {
		r = o
	}
	r.cpu, r.srvCPU = cpu, srvCPU
	return r
}

const benchRounds = 2

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchEvent returns the event JSON of frame i, padded so that its SSE
// message ("id: <i>\ndata: <event>\n\n") is benchMsgSize bytes.
func benchEvent(i int, now int64) []byte {
	head := fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","i":%d,"ts":%d,"messageId":"m1","delta":"`, i, now)
	frameLen := len("id: ") + len(strconv.Itoa(i)) + 1 + len("data: ") + 2 + 1
	pad := benchMsgSize - frameLen - len(head) - len(`"}`)
	return []byte(head + strings.Repeat("x", max(pad, 1)) + `"}`)
}

func sseOf(i int, ev []byte) []byte {
	b := append([]byte("id: "), strconv.Itoa(i)...)
	b = append(b, '\n')
	return appendData(b, ev)
}

// benchClients is n raw HTTP/1.1 SSE readers (no http.Client: its two
// goroutines per connection would tax the shared cores more than the
// servers under test).
type benchClients struct {
	last []atomic.Int64 // index of the last frame each client read
	lat  [][]int64      // per client: publish → read, ns
	seen atomic.Int64   // clients that have read at least one message
	// reached[i] counts the clients that have read frame i; the one that
	// makes it every client sends on wake, so that a closed-loop driver
	// waiting for frame i goes on at once (a sleep would round up to the
	// runtime's 1 ms poll when the process is idle, and measure that).
	reached []atomic.Int32
	n       int32
	wake    chan int
	// refused is the first refusal of a subscription (a status other than
	// the stream's, or no response), for the benchmark's failure message.
	refused atomic.Pointer[string]
	conns   []net.Conn
	wg      sync.WaitGroup
	started time.Time
}

func dialClients(b *testing.B, addr, path, tok string, n, frames int) *benchClients {
	req := "GET " + path + " HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\nAuthorization: Bearer " + tok + "\r\n\r\n"
	return dialRaw(b, addr, req, n, frames, (*benchClients).read)
}

// dialRaw opens n connections to addr, sends req on each and reads each
// with read in a goroutine of its own.
func dialRaw(b *testing.B, addr, req string, n, frames int, read func(c *benchClients, k int, conn net.Conn)) *benchClients {
	c := &benchClients{last: make([]atomic.Int64, n), lat: make([][]int64, n), conns: make([]net.Conn, n),
		reached: make([]atomic.Int32, frames), n: int32(n), wake: make(chan int, 1)}
	for k := 0; k < n; k++ {
		c.last[k].Store(-1)
		c.lat[k] = make([]int64, 0, frames)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Write([]byte(req)); err != nil {
			b.Fatal(err)
		}
		c.conns[k] = conn
		c.wg.Add(1)
		go read(c, k, conn)
	}
	return c
}

func (c *benchClients) read(k int, conn net.Conn) {
	defer c.wg.Done()
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		c.refuse(resp, err)
		return
	}
	body := bufio.NewReaderSize(resp.Body, 16<<10)
	first := true
	for {
		line, err := body.ReadSlice('\n')
		if err != nil {
			return
		}
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		if first {
			first = false
			c.seen.Add(1)
		}
		c.record(k, line)
	}
}

func (c *benchClients) refuse(resp *http.Response, err error) {
	why := fmt.Sprint(err)
	if resp != nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		why = resp.Status + ": " + strings.TrimSpace(string(body))
	}
	c.refused.CompareAndSwap(nil, &why)
}

// waitSubscribed waits until count says n clients are subscribed, and
// fails at once when a client was refused.
func (c *benchClients) waitSubscribed(b *testing.B, what string, n int, count func() int) {
	waitCond(b, what, func() bool {
		if why := c.refused.Load(); why != nil {
			b.Fatalf("%s: a client was refused: %s", what, *why)
		}
		return count() == n
	})
}

// record notes the bench event in msg, if it holds one, as read by client k.
func (c *benchClients) record(k int, msg []byte) {
	i, ts := parseBenchEvent(msg)
	if i >= 0 {
		c.lat[k] = append(c.lat[k], time.Now().UnixNano()-ts)
		c.last[k].Store(int64(i))
		if i < len(c.reached) && c.reached[i].Add(1) == c.n {
			select {
			case c.wake <- i:
			default:
			}
		}
	}
}

// waitAll returns once every client has read frame i (or, should a frame
// be missed, once minLast says so: the wake is a shortcut, not the truth).
func (c *benchClients) waitAll(i int) {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	for c.minLast() < int64(i) {
		select {
		case <-c.wake:
		case <-t.C:
			t.Reset(time.Millisecond)
		}
	}
}

func parseBenchEvent(line []byte) (int, int64) {
	j := bytes.Index(line, []byte(`"i":`))
	if j < 0 {
		return -1, 0
	}
	rest := line[j+4:]
	e := bytes.IndexByte(rest, ',')
	i, _ := strconv.Atoi(string(rest[:e]))
	rest = rest[e+len(`,"ts":`):]
	e = bytes.IndexByte(rest, ',')
	ts, _ := strconv.ParseInt(string(rest[:e]), 10, 64)
	return i, ts
}

// minLast returns the smallest frame index every client has read.
func (c *benchClients) minLast() int64 {
	m := int64(1 << 62)
	for k := range c.last {
		if v := c.last[k].Load(); v < m {
			m = v
		}
	}
	return m
}

func (c *benchClients) close() {
	for _, conn := range c.conns {
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST: no TIME_WAIT pile-up across runs
		}
		conn.Close()
	}
	c.wg.Wait()
}

// drive publishes frames with the closed-loop window and returns the result.
func drive(b *testing.B, c *benchClients, n, frames int, pace time.Duration, window int, publish func(i int)) benchResult {
	start, cpu0 := time.Now(), cpuTime()
	if pace > 0 {
		window = 0
	}
	for i := 0; i < frames; i++ {
		if pace > 0 {
			// Open loop: frame i goes out at start + i·pace, whether or
			// not the clients keep up.
			if d := time.Until(start.Add(time.Duration(i) * pace)); d > 0 {
				time.Sleep(d)
			}
		} else {
			if i >= window {
				c.waitAll(i - window)
			}
		}
		publish(i)
	}
	deadline := time.Now().Add(60 * time.Second)
	for c.minLast() < int64(frames-1) {
		if time.Now().After(deadline) {
			b.Fatalf("clients stuck at frame %d of %d", c.minLast(), frames)
		}
		time.Sleep(100 * time.Microsecond)
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	var all []int64
	for k := range c.lat {
		all = append(all, c.lat[k]...)
	}
	slices.Sort(all)
	if len(all) < n*frames {
		b.Fatalf("%d deliveries, want %d", len(all), n*frames)
	}
	return benchResult{
		window: window,
		rate:   float64(n*frames) / elapsed.Seconds(),
		p50:    float64(all[len(all)/2]) / 1e3,
		p99:    float64(all[len(all)*99/100]) / 1e3,
		cpu:    float64(cpu.Nanoseconds()) / float64(n*frames),
		lat:    all,
	}
}

func waitCond(b *testing.B, what string, cond func() bool) {
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// bareBroadcaster is the ceiling: the simplest correct SSE fan-out. With
// batch set, a client's goroutine writes everything already in its channel
// before one Flush (the one optimisation any hand-written broadcaster
// would make); without it, Write+Flush per message.
type bareBroadcaster struct {
	batch   bool
	mu      sync.Mutex
	clients []chan []byte
}

func (s *bareBroadcaster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	fl.Flush()
	ch := make(chan []byte, 1024)
	s.mu.Lock()
	s.clients = append(s.clients, ch)
	s.mu.Unlock()
	for {
		select {
		case m := <-ch:
			if _, err := w.Write(m); err != nil {
				return
			}
		more:
			for s.batch {
				select {
				case m := <-ch:
					if _, err := w.Write(m); err != nil {
						return
					}
				default:
					break more
				}
			}
			fl.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func (s *bareBroadcaster) broadcast(m []byte) {
	s.mu.Lock()
	for _, ch := range s.clients {
		ch <- m
	}
	s.mu.Unlock()
}

func (s *bareBroadcaster) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

func serve(b *testing.B, h http.Handler) (addr string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { _ = hs.Serve(ln); close(done) }()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		_ = hs.Close()
		<-done
	}
}

func runBare(b *testing.B, n, frames int, batch bool, pace time.Duration) benchResult {
	bb := &bareBroadcaster{batch: batch}
	addr, stop := serve(b, bb)
	defer stop()
	c := dialClients(b, addr, "/", "", n, frames)
	defer c.close()
	waitCond(b, "bare clients", func() bool { return bb.count() == n })
	b.ResetTimer()
	return drive(b, c, n, frames, pace, benchWindow, func(i int) {
		bb.broadcast(sseOf(i, benchEvent(i, time.Now().UnixNano())))
	})
}

func runThreadcast(b *testing.B, n, frames int, pace time.Duration) benchResult {
	return runThreadcastOver(b, "sse", n, frames, pace)
}

// runThreadcastOver is runThreadcast with the subscribers' transport chosen:
// "sse" (raw HTTP/1.1 readers) or "ws" (WebSocket readers, peer_bench_test.go).
// The fanout runs in this process, beside the clients.
func runThreadcastOver(b *testing.B, transport string, n, frames int, pace time.Duration) benchResult {
	ns := startNATS(b)
	nc := connect(b, ns)
	pub := connect(b, ns)
	feed := newBenchFeed(b, pub)
	defer feed.close()
	srv, err := New(nc, benchConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	addr, stop := serve(b, srv.Handler())
	defer stop()
	defer srv.Drain()
	c := dialThreadcast(b, addr, transport, n, frames)
	defer c.close()
	c.waitSubscribed(b, "threadcast subscribers", n, func() int {
		return int(counterValue(srv.m.Subscribers.WithLabelValues(benchVariant(transport).String())))
	})
	b.ResetTimer()
	return drive(b, c, n, frames, pace, benchWindow, feed.publish)
}

// The bench thread: one tenant, one busy thread.
const benchTenant, benchThread = "bench", "busy"

// benchConfig is the fanout's configuration in the benchmarks: the
// defaults, but every frame to every client, as the bare broadcaster and
// Centrifugo deliver them (a backlog consolidated into fewer messages
// would count as lost deliveries here). Pacing is off with it: it holds a
// client's writer back only so that its backlog is consolidated, and held
// without that, a backlog past the queue's limit is dropped.
func benchConfig() Config {
	cfg := DefaultConfig()
	cfg.AuthKey = testKey
	cfg.Hub.CoalesceBytes = -1
	cfg.UnreadBytes = -1
	return cfg
}

// benchVariant is the variant of the bench's subscribers over transport.
func benchVariant(transport string) Variant {
	if transport == "ws" {
		return AguiWS
	}
	return AguiSSE
}

// dialThreadcast opens n subscribers of the bench thread on addr over
// transport ("sse" or "ws").
func dialThreadcast(b *testing.B, addr, transport string, n, frames int) *benchClients {
	path := "/v1/threads/" + benchThread + "/events"
	if transport == "ws" {
		return dialWSClients(b, addr, path+"?access_token="+token(b, benchTenant), n, frames)
	}
	return dialClients(b, addr, path, token(b, benchTenant), n, frames)
}

// benchFeed plays the pipeline for the bench thread on pub: it publishes
// frame i as the ingest would, and answers snapshot requests with the
// thread at the last frame published (an empty view: subscribers join
// before the first frame).
type benchFeed struct {
	b    *testing.B
	pub  *nats.Conn
	subj string
	seq  atomic.Uint64
	sub  *nats.Subscription
}

func newBenchFeed(b *testing.B, pub *nats.Conn) *benchFeed {
	f := &benchFeed{b: b, pub: pub, subj: wire.ViewSubject(benchTenant, benchThread)}
	snapSubj := wire.SnapSubject(wire.Partition(benchTenant, benchThread, wire.DefaultParts), benchTenant, benchThread)
	sub, err := pub.Subscribe(snapSubj, func(m *nats.Msg) {
		_ = m.Respond([]byte(fmt.Sprintf(`{"tenant":%q,"thread":%q,"seq":%d,"status":"running","found":true,"view":{},"events":[]}`,
			benchTenant, benchThread, f.seq.Load())))
	})
	if err != nil {
		b.Fatal(err)
	}
	// The server must have the responder before the first join asks it:
	// a request nobody answers is refused at once ("no responders").
	if err := pub.Flush(); err != nil {
		b.Fatal(err)
	}
	f.sub = sub
	return f
}

// publish sends frame i. Stream seqs: frame i brings the thread to i+1
// (seq 0 = empty). The SSE id is then i+1 rather than i, one byte more for
// i = 9, 99… — noise against 256-byte messages.
func (f *benchFeed) publish(i int) {
	s := uint64(i + 1)
	ev := benchEvent(i, time.Now().UnixNano())
	body := append(append([]byte(`{"events":[`), ev...), "]}"...)
	m := &nats.Msg{Subject: f.subj, Data: body, Header: nats.Header{
		wire.HeaderSeq: {strconv.FormatUint(s, 10)}, wire.HeaderPrev: {strconv.FormatUint(s-1, 10)}}}
	if err := f.pub.PublishMsg(m); err != nil {
		f.b.Fatal(err)
	}
	f.seq.Store(s)
}

func (f *benchFeed) close() { _ = f.sub.Unsubscribe() }
