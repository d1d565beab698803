package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
)

// variant is a subscriber's transport and mode.
type variant uint8

const (
	aguiSSE variant = iota
	viewSSE
	aguiWS
	viewWS
	numVariants
)

func (v variant) String() string { return [...]string{"agui/sse", "view/sse", "agui/ws", "view/ws"}[v] }
func (v variant) view() bool     { return v == viewSSE || v == viewWS }
func (v variant) ws() bool       { return v == aguiWS || v == viewWS }

// sub is one simulated subscriber. Its goroutine owns everything but the
// atomics; the runner reads the rest only after that goroutine returned.
type sub struct {
	r         *runner
	id        int
	join      time.Time     // not before
	joinAfter time.Duration // join's offset from the start of the load
	th        *threadInfo
	v         variant
	slow      bool
	token     string

	// The subscriber's fold of what it received: a reducer Thread for agui
	// (the stream is AG-UI: any consumer folds it so), a viewDoc for view.
	agui *reducer.Thread
	dec  codec.Decoder
	ev   codec.Event
	vd   viewDoc

	cursor  string // SSE: the last id; view WS: the last seq ("" = join fresh)
	last    uint64 // seq of the last frame or snapshot taken in (not agui WS)
	joined  bool   // a snapshot was ever taken in (later ones are resyncs)
	inSnap  bool   // inside a snapshot's events (agui SSE)
	pend    []pendFrame
	pubIdx  int
	floor   uint64
	foldErr string
	// connStart is when the current connection was opened (UnixNano).
	// Events published before it are caught up with, not delivered live:
	// they are not latency samples (their delay includes the client's own
	// absence), only counted in catchUp.
	connStart int64
	catchUp   uint64

	seen     atomic.Uint64 // last, for the settle phase
	lastRecv atomic.Int64  // UnixNano of the last message
	conns    atomic.Int64  // connections made

	mu     sync.Mutex
	cancel context.CancelFunc // the current connection's (reconnect storm)

	gaps, dups, resyncs, reconnects, errs, warnings, foldFatal uint64
	msgs, bytes                                                uint64 // received, over every connection
	matched                                                    bool   // set by check: its final view equals the REST view
	// moves counts failed connections: the subscriber connects to fanout
	// node (id+moves) mod n of the run's nodes.
	moves int
}

// pendFrame is a frame end (or, with snap, a snapshot) whose latency is
// still to be accounted: every stored event with seq ≤ seq not yet
// accounted was delivered at t (a snapshot: not delivered as events).
type pendFrame struct {
	seq  uint64
	t    int64
	conn int64 // when the connection that carried it was opened
	snap bool
}

var errResync = errors.New("loadtest: resync needed")

// run connects, reads and reconnects until ctx ends.
func (s *sub) run(ctx context.Context) {
	select {
	case <-s.th.born:
	case <-ctx.Done():
		return
	}
	if d := time.Until(s.join); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	defer s.resolve() // what was delivered last, once its acks are in
	// After an error, wait like an EventSource does (the fanout announces
	// retry: 2s), with jitter so that refused clients do not return in step.
	const firstBackoff = 500 * time.Millisecond
	backoff := firstBackoff
	rng := rand.New(rand.NewPCG(uint64(s.id), 99))
	for ctx.Err() == nil {
		cctx, cancel := context.WithCancel(ctx)
		s.mu.Lock()
		s.cancel = cancel
		s.mu.Unlock()
		s.conns.Add(1)
		s.connStart = time.Now().UnixNano()
		s.r.stats.connected.Add(1)
		var err error
		if s.v.ws() {
			err = s.readWS(cctx)
		} else {
			err = s.readSSE(cctx)
		}
		s.r.stats.connected.Add(-1)
		cut := cctx.Err() != nil && ctx.Err() == nil // cut by the storm
		cancel()
		if ctx.Err() != nil {
			return
		}
		s.reconnects++
		if s.lastRecv.Load() > s.connStart {
			backoff = firstBackoff // the connection worked: start over
		}
		switch {
		case cut:
			backoff = firstBackoff
			continue // reconnect at once: that is the storm
		case errors.Is(err, errResync):
			s.cursor = ""
			backoff = 100 * time.Millisecond
		case err != nil:
			s.errs++
			s.moves++ // the next fanout node, as a load balancer would
			s.r.noteError(err)
		default:
			backoff = 100 * time.Millisecond // the server ended the stream
		}
		t := time.NewTimer(backoff + time.Duration(rng.Int64N(int64(backoff))))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// cut ends the current connection (the reconnect storm).
func (s *sub) cut() {
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
}

func (s *sub) streamURL(ws bool) string {
	u := s.r.bases[(s.id+s.moves)%len(s.r.bases)] + "/v1/threads/" + url.PathEscape(s.th.thread) + "/events"
	if ws {
		u = "ws" + strings.TrimPrefix(u, "http")
	}
	q := url.Values{}
	if s.v.view() {
		q.Set("mode", "view")
	}
	if ws && s.cursor != "" {
		q.Set("after", s.cursor)
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func (s *sub) readSSE(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.streamURL(false), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Accept", "text/event-stream")
	if s.cursor != "" {
		req.Header.Set("Last-Event-ID", s.cursor)
	}
	res, err := s.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("loadtest: connect: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("loadtest: connect: %s", res.Status)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 4<<10), 64<<20) // grows as needed: 5,000 idle 64 KiB buffers were 300 MB of heap
	first := true
	var id string
	var data []byte
	hasData := false
	for sc.Scan() {
		line := sc.Bytes()
		s.bytes += uint64(len(line) + 1)
		s.r.series.at(time.Now()).bytesOut.Add(uint64(len(line) + 1))
		s.r.stats.bytesOut.Add(uint64(len(line) + 1))
		switch {
		case len(line) == 0:
			if !hasData && id == "" {
				continue
			}
			if err := s.dispatchSSE(id, data, hasData, first); err != nil {
				return err
			}
			first, id, data, hasData = false, "", data[:0], false
		case line[0] == ':':
			// Comments: keep-alives, and ": end reason=... after=<seq>",
			// whose cursor is our last id anyway.
		case strings.HasPrefix(string(line), "id:"):
			id = strings.TrimSpace(string(line[3:]))
		case strings.HasPrefix(string(line), "data:"):
			d := line[5:]
			if len(d) > 0 && d[0] == ' ' {
				d = d[1:]
			}
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, d...), true
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("loadtest: read: %w", err)
	}
	return nil
}

func (s *sub) dispatchSSE(id string, data []byte, hasData, first bool) error {
	now := time.Now()
	s.received(now)
	seqStr, suffix, dotted := strings.Cut(id, ".")
	seq, _ := strconv.ParseUint(seqStr, 10, 64)
	if id != "" {
		s.cursor = id
	}
	if s.v.view() {
		if !hasData {
			return nil
		}
		return s.viewPayload(data, now)
	}
	snap := dotted && suffix == "snap"
	if first && (snap || !hasData) {
		s.startSnapshot()
	}
	if hasData {
		s.applyAgui(data, now, false)
	}
	if !dotted && id != "" {
		// The end of a frame, or of a snapshot that began on this connection
		// or was spliced in (its events carry ".snap" ids).
		if s.inSnap || (first && !hasData) {
			s.inSnap = false
			s.pend = append(s.pend, pendFrame{seq: seq, t: now.UnixNano(), conn: s.connStart, snap: true})
		} else {
			if seq <= s.last {
				s.dups++
			}
			s.pend = append(s.pend, pendFrame{seq: seq, t: now.UnixNano(), conn: s.connStart})
		}
		s.last = seq
		s.seen.Store(seq)
		s.resolve()
	} else if snap {
		if !s.inSnap && !first && s.joined {
			s.resyncs++ // spliced in mid-stream (overflow or gap)
		}
		s.inSnap = true
		s.joined = true
	}
	s.pause()
	return nil
}

// startSnapshot begins a fresh fold: a new connection that starts with a
// snapshot restates the whole thread.
func (s *sub) startSnapshot() {
	if s.joined {
		s.resyncs++
	}
	s.joined = true
	s.inSnap = true
	s.agui = reducer.NewThread(s.th.thread)
}

func (s *sub) readWS(ctx context.Context) error {
	c, _, err := websocket.Dial(ctx, s.streamURL(true), &websocket.DialOptions{
		HTTPClient: s.httpClient(),
		HTTPHeader: http.Header{"Authorization": {"Bearer " + s.token}},
	})
	if err != nil {
		return fmt.Errorf("loadtest: ws connect: %w", err)
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 20)
	first := true
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil || websocket.CloseStatus(err) != -1 {
				return nil // our cut, or the server ended the stream (lifetime, drain, resync)
			}
			return fmt.Errorf("loadtest: ws read: %w", err)
		}
		now := time.Now()
		s.received(now)
		s.bytes += uint64(len(data))
		s.r.series.at(now).bytesOut.Add(uint64(len(data)))
		s.r.stats.bytesOut.Add(uint64(len(data)))
		if s.v.view() {
			if err := s.viewPayload(data, now); err != nil {
				return err
			}
			s.cursor = strconv.FormatUint(s.last, 10)
			continue
		}
		if first {
			// Without ids, a new agui WebSocket always starts from a fresh
			// snapshot.
			s.startSnapshot()
			s.inSnap = false
			first = false
		}
		s.applyAgui(data, now, true)
		s.pause()
	}
}

func (s *sub) received(now time.Time) {
	s.msgs++
	s.lastRecv.Store(now.UnixNano())
	s.r.stats.msgsOut.Add(1)
	s.r.series.at(now).msgsOut.Add(1)
}

func (s *sub) pause() {
	if s.slow {
		time.Sleep(s.r.sc.slowPause)
	}
}

// viewPayload folds one view-mode payload and accounts its latency.
func (s *sub) viewPayload(data []byte, now time.Time) error {
	typ, seq, err := s.vd.apply(data)
	switch {
	case errors.Is(err, errGap):
		if seq <= s.last {
			s.dups++
		} else {
			s.gaps++
		}
		return errResync
	case err != nil:
		s.foldFatal++
		if s.foldErr == "" {
			s.foldErr = err.Error()
		}
		return errResync
	}
	if typ == "view" {
		if s.joined {
			s.resyncs++
		}
		s.joined = true
	}
	s.pend = append(s.pend, pendFrame{seq: seq, t: now.UnixNano(), conn: s.connStart, snap: typ == "view"})
	s.last = seq
	s.seen.Store(seq)
	s.resolve()
	s.pause()
	return nil
}

// applyAgui folds one AG-UI event; over WebSocket (no seq on the wire) the
// latency of live deltas is measured from their `timestamp` (ms).
func (s *sub) applyAgui(data []byte, now time.Time, ws bool) {
	if s.agui == nil {
		s.agui = reducer.NewThread(s.th.thread)
	}
	if err := s.dec.Decode(data, &s.ev); err != nil {
		s.foldFatal++
		if s.foldErr == "" {
			s.foldErr = "decode: " + err.Error()
		}
		return
	}
	res := s.agui.Apply(0, &s.ev)
	if res.Fatal != nil {
		s.foldFatal++
		if s.foldErr == "" {
			s.foldErr = "apply " + string(data[:min(len(data), 200)]) + ": " + res.Fatal.Error()
		}
	}
	s.warnings += uint64(len(res.Warnings))
	if ws && !s.slow && s.ev.Fields.Has(codec.FieldTimestamp) {
		switch s.ev.Type {
		case codec.TypeTextMessageContent, codec.TypeToolCallArgs, codec.TypeReasoningMessageContent,
			codec.TypeStateDelta, codec.TypeActivityDelta:
			// Never part of a snapshot (which restates with snapshots,
			// STARTs and chunks), so the timestamp is the publish time of
			// this content (of its first part, when deltas were joined).
			pubNs := s.ev.Timestamp * int64(time.Millisecond)
			if pubNs < s.connStart-int64(time.Millisecond) {
				s.catchUp++
				break
			}
			d := now.UnixNano() - pubNs
			s.r.hists[s.v].Record(d)
			s.r.series.at(now).hist.Record(d)
		}
	}
}

// resolve accounts pending frame ends against the thread's acked events.
func (s *sub) resolve() {
	if len(s.pend) == 0 {
		return
	}
	th := s.th
	th.mu.Lock()
	defer th.mu.Unlock()
	n := 0
	for _, p := range s.pend {
		for s.pubIdx < len(th.pubs) && th.pubs[s.pubIdx].seq <= p.seq {
			pr := th.pubs[s.pubIdx]
			switch {
			case p.snap || pr.seq <= s.floor || s.slow:
			case pr.ns < p.conn:
				s.catchUp++
			default:
				d := p.t - pr.ns
				s.r.hists[s.v].Record(d)
				s.r.series.atNano(p.t).hist.Record(d)
			}
			s.pubIdx++
		}
		if th.lastSeq < p.seq {
			break // acks not reaped yet: later events of this frame still come
		}
		if p.seq > s.floor {
			s.floor = p.seq
		}
		n++
	}
	s.pend = append(s.pend[:0], s.pend[n:]...)
}

// httpClient is the client s connects with: a slow subscriber's may have
// a capped receive buffer (scenario.slowRecvBuf).
func (s *sub) httpClient() *http.Client {
	if s.slow {
		return s.r.slowClient
	}
	return s.r.client
}
