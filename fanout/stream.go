package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/valyala/bytebufferpool"
)

// Stream end reasons (the Ended metric's labels and the end hint's text).
const (
	EndClient   = "client"   // the client went away
	EndLifetime = "lifetime" // MaxLifetime reached
	EndShutdown = "shutdown" // the server is draining
	EndWrite    = "write"    // a write failed or timed out
	EndResync   = "resync"   // the subscriber could not be brought up to date in place
	EndIdle     = "idle"     // a POSTed agui stream: no run open, everything written
	// EndTokenExpired: the stream's token expired; the client resumes from
	// the cursor with a fresh token.
	EndTokenExpired = "token_expired"
	EndSlow         = "slow" // a tap reader fell behind and messages for it were dropped
)

// StatusTokenExpired is the WebSocket close code of a stream whose token
// expired (private-use range; 4000 + HTTP 401).
const StatusTokenExpired websocket.StatusCode = 4401

// maxRunInput bounds a POSTed RunAgentInput.
const maxRunInput = 1 << 20

// events serves GET/POST /v1/threads/{thread}/events as SSE, or as
// WebSocket when the request is an upgrade.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	c, thread, ok := s.authorizeThread(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	view := false
	switch q.Get("mode") {
	case "", "agui":
	case "view":
		view = true
	default:
		s.deny(w, http.StatusBadRequest, "bad_mode")
		return
	}
	window, ok := s.windowParam(w, r)
	if !ok {
		return
	}
	if r.Method == http.MethodPost && !s.checkRunInput(w, r, thread) {
		return
	}
	ws := r.Header.Get("Upgrade") != "" && r.Method == http.MethodGet
	v := AguiSSE
	switch {
	case ws && view:
		v = ViewWS
	case ws:
		v = AguiWS
	case view:
		v = ViewSSE
	}
	after := ParseCursor(r.Header.Get("Last-Event-ID"))
	if a := q.Get("after"); a != "" {
		after = ParseCursor(a)
	}
	end, ok := s.beginStream(w, c.Tenant, thread, false)
	if !ok {
		return
	}
	defer end()
	ctx := r.Context()
	release, ok := s.admitJoin(ctx, w)
	if !ok {
		return
	}
	defer release()
	// The join ends with the stream's first write (pump): what a client
	// waits for before it sees the thread.
	joined := func() {
		s.m.Join.Observe(time.Since(arrived).Seconds())
		release()
	}
	sub, err := s.hub.SubscribeWindow(ctx, c.Tenant, thread, v, after, window)
	if err != nil {
		s.log.Warn("fanout: subscribe failed", "tenant", c.Tenant, "err", err)
		s.denyUnavailable(w, err)
		return
	}
	defer sub.Close()
	tc := tcpConnOf(connOf(r))
	s.capSendBuffer(tc)
	var sk sink
	if ws {
		cc := &corkConn{timeout: s.cfg.WriteTimeout}
		conn, err := websocket.Accept(corkWriter{w, cc}, r, &websocket.AcceptOptions{
			// Auth is a bearer token, never an ambient cookie, so a
			// cross-origin page cannot ride on a victim's credentials:
			// the origin check would protect nothing.
			InsecureSkipVerify: true,
		})
		if err != nil {
			return // Accept wrote the HTTP error
		}
		ctx = conn.CloseRead(ctx) // discards client messages; cancels ctx when the peer closes
		wk := &wsSink{c: conn, cc: cc, timeout: s.cfg.WriteTimeout}
		defer wk.close()
		sk = wk
	} else {
		ssk := newSSESink(w, s.cfg)
		if r.ProtoMajor == 1 {
			var stop func()
			if ctx, stop = ssk.takeOver(ctx); stop != nil {
				defer stop()
			}
		}
		sk = ssk
	}
	pc := newPacer(tc, s.cfg.UnreadBytes, s.cfg.WriteTimeout)
	// An AG-UI HttpAgent POSTs and waits for the response to end, which
	// the SSE binding says happens after the last run's terminal event.
	reason := s.pump(ctx, sub, sk, pc, joined, r.Method == http.MethodPost, s.cfg.Verifier.Deadline(c))
	s.m.Ended.WithLabelValues(reason).Inc()
}

// connKey is the context key of the request's connection (withConn).
type connKey struct{}

// withConn is the http.Server's ConnContext: it keeps each connection in
// its requests' contexts, for the stream handlers (tcpConnOf).
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// connOf returns the connection r came on, when it is one served by Run or
// Serve (withConn), else nil.
func connOf(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}

// tcpConnOf returns the TCP connection under c (wrappers that expose
// NetConn, as tls.Conn and the connection limiter's do, are unwrapped), or
// nil: an httptest server's, say, or none.
func tcpConnOf(c net.Conn) *net.TCPConn {
	for c != nil {
		if tc, ok := c.(*net.TCPConn); ok {
			return tc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// capSendBuffer sets the kernel send buffer of a stream's connection to
// Config.SendBuffer (see there); nil (not a connection served by Run or
// Serve) keeps the kernel's.
func (s *Server) capSendBuffer(tc *net.TCPConn) {
	if s.cfg.SendBuffer > 0 && tc != nil {
		_ = tc.SetWriteBuffer(s.cfg.SendBuffer)
	}
}

// checkRunInput validates a POSTed RunAgentInput (what an AG-UI HttpAgent
// sends): a JSON object whose threadId, when present, is the URL's thread.
// The input is not executed — Threadcast streams threads, it runs no agent —
// but a structurally invalid one is refused before the stream, as the SSE
// binding requires.
func (s *Server) checkRunInput(w http.ResponseWriter, r *http.Request, thread string) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRunInput))
	var in struct {
		ThreadID *string `json:"threadId"`
	}
	if err != nil || json.Unmarshal(body, &in) != nil || (len(body) > 0 && body[0] != '{') {
		s.deny(w, http.StatusBadRequest, "bad_run_input")
		return false
	}
	if in.ThreadID != nil && *in.ThreadID != thread {
		s.deny(w, http.StatusBadRequest, "thread_mismatch")
		return false
	}
	return true
}

// sink is one connection's transport.
type sink interface {
	// open sends what starts the stream (SSE headers) right away, so the
	// client sees the stream open even when there is nothing to send yet.
	open() error
	// write writes items (one batch) and flushes; it returns bytes written.
	write(items []item) (int, error)
	heartbeat() error
	// probe sends the least the client will ignore, so that the
	// acknowledgement of it announces the client's receive window (pace.go).
	probe() error
	// end tells the client why the stream ends and where to resume.
	end(reason string, cursor uint64)
}

// pump is the connection's writer: the one goroutine that drains sub. Each
// wake-up writes everything queued with one flush, so a busy thread costs
// one syscall per batch, not per frame. It waits on nothing but the
// subscriber's signal: heartbeat, lifetime, drain and client disconnect
// raise that same signal from timer and context callbacks (no goroutine,
// and a one-channel receive instead of a five-way select per batch, which
// the fan-out benchmark showed in its profile). The stream ends at
// expires, its token's deadline, whatever MaxLifetime says.
//
// With a pacer (pace.go), the writer takes nothing while its client has
// too much unread; a timer, not the frames, wakes it then.
func (s *Server) pump(ctx context.Context, sub *subscriber, sk sink, pc *pacer, joined func(), endWhenIdle bool, expires time.Time) string {
	hb := time.AfterFunc(s.cfg.Heartbeat, func() { sub.raise(ctlHeartbeat) })
	defer hb.Stop()
	if s.cfg.MaxLifetime > 0 {
		lt := time.AfterFunc(s.cfg.MaxLifetime, func() { sub.raise(ctlLifetime) })
		defer lt.Stop()
	}
	ex := time.AfterFunc(expires.Sub(s.cfg.Now()), func() { sub.raise(ctlExpired) })
	defer ex.Stop()
	defer context.AfterFunc(ctx, sub.notify)()
	defer context.AfterFunc(s.drainCtx, sub.notify)()
	bytesSent := s.m.BytesSent.WithLabelValues(sub.Variant().String())
	var buf []item
	cursor := sub.start // what the client holds until a Take says more
	if sk.open() != nil {
		return EndWrite
	}
	var hold paceHold
	defer hold.stop()
	for {
		if held, reason := hold.check(s, pc, sub, sk); reason != "" {
			return reason
		} else if !held {
			items, cur, resync := sub.Take(buf)
			if resync != "" {
				if err := sub.CatchUp(ctx); err != nil {
					if ctx.Err() != nil {
						return EndClient
					}
					s.log.Debug("fanout: stream ends for a resync", "err", err)
					sk.end(EndResync, cursor)
					return EndResync
				}
				buf = items[:0]
				continue
			}
			if len(items) > 0 {
				n, err := sk.write(items)
				bytesSent.Add(float64(n))
				if pc != nil {
					pc.wrote(n)
				}
				s.observeLatency(items)
				clear(items) // drop references to shared frames
				if err != nil {
					return EndWrite
				}
			}
			if joined != nil { // the join is done: written, or nothing to write
				joined()
				joined = nil
			}
			buf = items[:0]
			cursor = max(cursor, cur)
			if endWhenIdle && sub.idle() {
				return EndIdle
			}
		}
		switch ctl := sub.ctl.Swap(0); {
		case ctx.Err() != nil:
			if f, ok := sk.(*wsSink); ok && f.pingFailed.Load() {
				return EndWrite
			}
			return EndClient
		case s.stopped.Load():
			s.flushAndEnd(sub, sk, EndShutdown, cursor)
			return EndShutdown
		case ctl&ctlExpired != 0:
			s.flushAndEnd(sub, sk, EndTokenExpired, cursor)
			return EndTokenExpired
		case ctl&ctlLifetime != 0:
			s.flushAndEnd(sub, sk, EndLifetime, cursor)
			return EndLifetime
		case ctl&ctlHeartbeat != 0:
			if sk.heartbeat() != nil {
				return EndWrite
			}
			hb.Reset(s.cfg.Heartbeat)
		}
		// Anything enqueued while we wrote left a signal behind, so
		// waiting now cannot miss it.
		<-sub.Ready()
	}
}

// paceHold is the writer's side of pacing (pace.go): the timer that wakes
// a held writer.
type paceHold struct {
	tick *time.Timer
}

// check asks pc whether the writer may take and write now. When not, it
// marks the subscriber paced (frames stop waking the writer, and what it
// takes next is consolidated), sends a probe if pc asks for one, and arms
// the timer that wakes the writer to look again. A non-empty reason ends
// the stream.
func (h *paceHold) check(s *Server, pc *pacer, sub *subscriber, sk sink) (held bool, reason string) {
	if pc == nil {
		return false, ""
	}
	act := pc.next()
	if act == paceWrite {
		if pc.behind {
			sub.markSlow()
		}
		sub.paced.Store(false)
		return false, ""
	}
	if !sub.paced.Swap(true) {
		sub.markSlow()
		s.m.paced[sub.Variant()].Inc()
	}
	switch act {
	case paceCut:
		return true, EndWrite
	case paceProbeNow:
		if sk.probe() != nil {
			return true, EndWrite
		}
	}
	if h.tick == nil {
		h.tick = time.AfterFunc(paceTick, sub.notify)
	} else {
		h.tick.Reset(paceTick)
	}
	return true, ""
}

func (h *paceHold) stop() {
	if h.tick != nil {
		h.tick.Stop()
	}
}

// flushAndEnd writes what is still queued, then the end hint.
func (s *Server) flushAndEnd(sub *subscriber, sk sink, reason string, cursor uint64) {
	items, cur, resync := sub.Take(nil)
	if resync == "" && len(items) > 0 {
		if _, err := sk.write(items); err == nil {
			cursor = cur
		}
	}
	sk.end(reason, cursor)
}

// observeLatency records, once per batch, the latency of the batch's
// oldest timestamped item and the deliver stage of its oldest frame: the
// worst in the batch, for one clock read and two histogram updates.
func (s *Server) observeLatency(items []item) {
	var ts int64
	var fr *frame
	for i := range items {
		if ts == 0 {
			ts = items[i].ts
		}
		if fr == nil {
			fr = items[i].fr
		}
		if ts > 0 && fr != nil {
			break
		}
	}
	if ts <= 0 && fr == nil {
		return
	}
	now := time.Now()
	if ts > 0 {
		s.m.Latency.Observe(float64(now.UnixMilli()-ts) / 1000)
	}
	if fr != nil {
		s.m.stageDeliver.Observe(float64(now.UnixNano()-fr.recvAt) / 1e9)
	}
}

// sseSink writes SSE. Over HTTP/1 it takes the connection over from
// net/http (takeOver) and writes each batch to the socket through a
// corkConn, as the WebSocket sink does: the batch in one write (up to
// corkMax), no chunked framing (the body ends when the connection
// closes, which is how an SSE stream ends anyway), the write deadline
// moved while the client accepts bytes. A batch of small events then
// costs one system call instead of one per 4 KiB, and the client reads
// them without a chunk decoder. Otherwise (HTTP/2, or a ResponseWriter
// that cannot be taken over) it writes to the ResponseWriter.
type sseSink struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	cc       *corkConn // the connection, taken over; nil: w
	timeout  time.Duration
	deadline time.Time // current write deadline (w)
	// unrefreshed counts the bytes written since the deadline was last
	// looked at (refresh).
	unrefreshed int
	started     bool
	retry       time.Duration
}

func newSSESink(w http.ResponseWriter, cfg Config) *sseSink {
	return &sseSink{w: w, rc: http.NewResponseController(w), timeout: cfg.WriteTimeout, retry: cfg.Retry}
}

// takeOver hijacks the request's connection for the sink. The returned
// context, derived from ctx, ends when the client closes its side: a
// goroutine reads (and discards) what the client sends, through
// net/http's reader, as its background read did until the hijack. stop
// closes the connection and waits for that goroutine. When the connection
// cannot be taken over it returns ctx and a nil stop, and the sink writes
// to the ResponseWriter.
func (k *sseSink) takeOver(ctx context.Context) (context.Context, func()) {
	conn, brw, err := k.rc.Hijack()
	if err != nil {
		return ctx, nil
	}
	k.cc = &corkConn{Conn: conn, timeout: k.timeout}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	rd := brw.Reader
	go func() {
		defer close(done)
		// A small buffer: reads go through rd's own, and a client sends
		// nothing after its request (io.Copy would hold 8 KiB a stream).
		var p [64]byte
		for {
			if _, err := rd.Read(p[:]); err != nil {
				break
			}
		}
		cancel()
	}()
	return ctx, func() {
		_ = conn.Close()
		<-done
	}
}

// start writes the response's head and the retry hint, once: to the
// connection (buffered while it is corked) or to the ResponseWriter.
func (k *sseSink) start() error {
	if k.started {
		return nil
	}
	k.started = true
	h := k.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	retry := "retry: " + strconv.FormatInt(k.retry.Milliseconds(), 10) + "\n\n"
	if k.cc == nil {
		k.w.WriteHeader(http.StatusOK)
		_, _ = k.w.Write([]byte(retry))
		return nil
	}
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Connection", "close")
	b := bytebufferpool.Get()
	defer bytebufferpool.Put(b)
	_, _ = b.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(b)
	_, _ = b.WriteString("\r\n" + retry)
	_, err := k.cc.Write(b.B)
	return err
}

func (k *sseSink) open() error {
	if err := k.start(); err != nil || k.cc != nil {
		return err
	}
	return k.rc.Flush()
}

// writeChunk is the most written to a ResponseWriter under one write
// deadline: a batch is written item by item and a larger item (a
// consolidated backlog, the snapshot of a long thread) in chunks, the
// deadline moved before every writeChunk bytes, so that WriteTimeout
// bounds how long a client accepts no bytes at all (no chunk of the
// connection's buffer, 4 KiB), not how long a batch takes: a slow reader
// that keeps reading is never cut.
const writeChunk = 4 << 10

func (k *sseSink) write(items []item) (int, error) {
	if k.cc != nil {
		if err := k.start(); err != nil { // written by open, in a stream
			return 0, err
		}
		return k.cc.batch(items, func(b []byte) error {
			_, err := k.cc.Write(b)
			return err
		}, math.MaxInt) // one Write per item, whatever its size
	}
	_ = k.start()
	k.refresh()
	n := 0
	for i := range items {
		b := items[i].b
		for len(b) > 0 {
			if k.unrefreshed >= writeChunk {
				k.refresh()
			}
			m, err := k.w.Write(b[:min(len(b), writeChunk-k.unrefreshed)])
			n += m
			k.unrefreshed += m
			if err != nil {
				return n, err
			}
			b = b[m:]
		}
	}
	return n, k.rc.Flush()
}

// refresh moves the write deadline. It costs a clock read, and a timer
// update only once an eighth of the timeout is used: every write gets at
// least 7/8 of it.
func (k *sseSink) refresh() {
	k.unrefreshed = 0
	if now := time.Now(); k.deadline.Sub(now) < k.timeout-k.timeout/8 {
		k.deadline = now.Add(k.timeout)
		_ = k.rc.SetWriteDeadline(k.deadline)
	}
}

var hbComment = []byte(": keep-alive\n\n")

// slowComment is the last thing a tap reader that fell behind reads.
var slowComment = []byte(": end slow reader: messages were dropped; reconnect\n\n")

func (k *sseSink) heartbeat() error {
	_, err := k.write([]item{{b: hbComment}})
	return err
}

// probeComment is an empty SSE comment line: nothing to an SSE parser,
// a segment to acknowledge to the client's kernel.
var probeComment = []byte(":\n")

func (k *sseSink) probe() error {
	_, err := k.write([]item{{b: probeComment}})
	return err
}

// end sends a comment naming the reason and the cursor. EventSource clients
// reconnect by themselves with Last-Event-ID (the last id: they saw), which
// is the same cursor; the comment is for other clients and for people.
func (k *sseSink) end(reason string, cursor uint64) {
	b := []byte(": end reason=" + reason + " after=" + strconv.FormatUint(cursor, 10) + "\n\n")
	_, _ = k.write([]item{{b: b}})
}

// wsSink writes WebSocket messages: one wire message per item, a batch of
// them in one socket write (corkConn). The socket's write deadline, moved
// while the client accepts bytes, bounds every write, so the messages are
// written without a context of their own.
type wsSink struct {
	c       *websocket.Conn
	cc      *corkConn
	timeout time.Duration

	pinging    atomic.Bool // a ping is unanswered
	pingFailed atomic.Bool // one was not answered in time: the connection was closed
	pings      sync.WaitGroup
}

func (k *wsSink) write(items []item) (int, error) {
	return k.cc.batch(items, func(b []byte) error {
		return k.c.Write(context.Background(), websocket.MessageText, b)
	}, wsDirectMax)
}

func (k *wsSink) open() error { return nil }

// heartbeat pings; a client that does not answer within the write timeout
// is disconnected (ping).
func (k *wsSink) heartbeat() error {
	k.ping()
	return nil
}

func (k *wsSink) probe() error {
	k.ping()
	return nil
}

// ping sends a ping unless one is unanswered, and does not wait for the
// pong: behind a slow reader's backlog it can take seconds, during which
// the writer goes on. A goroutine waits for it, for at most staleFactor ×
// the write timeout (pace.go). A client that read nothing in that time is
// gone: the goroutine closes the connection (the writer then ends with
// EndWrite). One that has been reading all along (the connection took
// bytes since the ping) is slow, not gone: its pong is behind what it had
// still to read, so the goroutine pings again and waits as long again.
// close waits for that goroutine.
func (k *wsSink) ping() {
	if !k.pinging.CompareAndSwap(false, true) {
		return
	}
	k.pings.Add(1)
	go func() {
		defer k.pings.Done()
		defer k.pinging.Store(false)
		for {
			from := k.cc.written.Load()
			ctx, cancel := context.WithTimeout(context.Background(), staleFactor*k.timeout)
			err := k.c.Ping(ctx)
			cancel()
			if err == nil {
				return
			}
			if errors.Is(err, context.DeadlineExceeded) && k.cc.written.Load() != from {
				continue
			}
			k.pingFailed.Store(true)
			_ = k.c.CloseNow()
			return
		}
	}()
}

// close closes the connection (if the stream did not end it) and waits for
// an unanswered ping's goroutine, which that ends.
func (k *wsSink) close() {
	_ = k.c.CloseNow()
	k.pings.Wait()
}

// end closes with 1012 (service restart) on shutdown, 1013 (try again
// later) on a resync, StatusTokenExpired (4401) when the token expired,
// 1000 otherwise; the reason text carries the cursor: "<reason> after=<seq>".
func (k *wsSink) end(reason string, cursor uint64) {
	code := websocket.StatusNormalClosure
	if reason == EndShutdown {
		code = websocket.StatusServiceRestart
	}
	if reason == EndResync {
		code = websocket.StatusTryAgainLater
	}
	if reason == EndTokenExpired {
		code = StatusTokenExpired
	}
	_ = k.c.Close(code, reason+" after="+strconv.FormatUint(cursor, 10))
}

// admitJoin waits for one of the join slots (Config.MaxJoins) and returns
// the function that gives it back, which the stream calls once its first
// take is written (or had nothing to write) and again as it ends (only
// the first call counts). A client that leaves while it waits gets
// nothing; a server that starts draining answers 503, as for a stream
// that came after.
func (s *Server) admitJoin(ctx context.Context, w http.ResponseWriter) (func(), bool) {
	if s.joins == nil {
		return func() {}, true
	}
	start := time.Now()
	select {
	case s.joins <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	case <-s.drainCtx.Done():
		s.denyDraining(w)
		return nil, false
	}
	s.m.JoinWait.Observe(time.Since(start).Seconds())
	var once sync.Once
	return func() { once.Do(func() { <-s.joins }) }, true
}
