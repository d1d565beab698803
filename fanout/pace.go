package fanout

import (
	"net"
	"time"
)

// NOTE: pacing a stream to its client. Consolidation (coalesce.go) can
// only shorten what is still in a subscriber's queue. Whatever the writer
// has handed to the kernel reaches the client event by event, and the
// kernels on both ends hold a lot: the client's receive buffer alone grows
// to hundreds of KiB, and on loopback its window opens in 64 KiB steps. A
// dashboard that reads 4 messages a second would spend minutes reading
// stale deltas out of its own socket before it saw a consolidated one.
//
// So the writer watches how much its client has not read yet, as TCP sees
// it (TCP_INFO), and holds back while that passes Config.UnreadBytes:
//
//	unread = (the largest window the client has advertised − its current one)
//	       + the bytes still unsent in this side's send queue
//
// The first term is what sits in the client's receive buffer (a window is
// its free space); bytes in flight are not counted, so a fast client far
// away is not held to a round trip's worth. While held, the writer takes
// nothing from the subscriber's queue, which grows and is consolidated by
// meaning as any slow subscriber's is (the subscriber is marked slow, so
// that what it takes next is consolidated even below the high-water mark);
// frames do not wake it (subscriber.paced), a timer does (paceTick). When
// the client has read enough, the writer takes the whole queue as it is
// then, in one consolidated batch: the slower the client, the longer the
// interval a batch covers and the fewer, larger messages it holds.
//
// A client whose hold outlasted quickRelease is behind (pacer.behind):
// everything it takes is consolidated, the writer looks at its window
// before every write, and holds it as soon as more than UnreadBytes/4 is
// unread. So it is written to only once it has read nearly all it was
// sent, and then gets everything since in one batch: frames as they come,
// one by one, would fill the room between the two marks with raw events
// after every hold, and a reader of a few messages a second would spend
// most of its reading on them. A behind client released within
// quickRelease (it read its backlog as soon as a probe let it say so)
// keeps up again, and is paced as any other.
//
// The window shows unread bytes only to within a segment. A receiver
// keeps announcing the window it last offered for as long as that is
// within one segment of its free space, and sends no update for a read
// that does not double it: so a client that has read everything may go on
// announcing up to a segment (this side's MSS) less than its largest
// window, for as long as it stays connected. On loopback, where a client
// with a small buffer is offered segments of half its buffer or more, that
// is more than UnreadBytes. A held client whose window is open and has not
// moved for a while is therefore written to while what it shows unread is
// within UnreadBytes plus a segment: it may well have read it all. The
// while is stillFor, doubled after each such write up to half the cut-off
// below, until the client is released as reading (within the limit): a
// slow client that had not read it all gets few, large batches, as any
// held one does. A client that has stopped reading takes those writes
// into its window until the window shuts, and is then held (and in the
// end cut, below).
//
// A client's receive window is re-announced lazily: a receiver that reads
// part of its buffer sends no window update until the window would double
// or until it acknowledges new data. A held writer therefore sends a
// probe (an SSE comment line, a WebSocket ping) when the hold begins and
// again while it lasts; its acknowledgement carries the current window
// (probes back off while the window stays shut, from paceProbe to
// 16 × paceProbe). The window shows reading only in whole segments, though: a
// receiver keeps it shut until a segment's worth (up to 64 KiB on
// loopback, where segments are large) is free again, and a client reading
// a few messages a second takes many seconds for that. A held client
// whose window has not opened for staleFactor × WriteTimeout is cut off
// (EndWrite): holding back never writes into a full socket, so the write
// deadline alone would not notice a client that stopped reading. The
// same bound applies to a WebSocket pong, which a slow client sends only
// once it has read up to the ping.
//
// Fast subscribers pay one getsockopt per UnreadBytes/2 bytes written, and
// nothing else: a client that keeps up drains its receive buffer, and the
// acknowledgement of the last segment carries the full window at once. On
// systems without TCP_INFO's peer window (not Linux, or Linux before 6.2,
// where it reads zero) and on connections that are not TCP, nothing is
// held, and the kernel buffers are bounded by Config.SendBuffer only.

const (
	// paceTick is how often a held writer looks at its client's window.
	paceTick = 20 * time.Millisecond
	// paceProbe is how long a held writer waits for the window to move
	// before it sends a probe, whose acknowledgement announces it.
	paceProbe = 100 * time.Millisecond
	// maxProbeBackoff caps the probe interval at paceProbe << 4 (1.6 s).
	maxProbeBackoff = 4
	// staleFactor × WriteTimeout is how long a held client may show no
	// reading, and a WebSocket ping wait for its pong.
	staleFactor = 6
	// quickRelease: a hold released within it (the probe sent as it began
	// showed the client had read, at the first look after it) does not
	// make the client behind.
	quickRelease = 2 * paceTick
	// stillFor: a held client whose open window has not moved for it is
	// written to while it shows no more than a segment beyond the limit
	// unread (see pacer.next); the wait doubles while that repeats.
	stillFor = time.Second
)

// peerWindow reads a TCP connection's state for pacing. unread returns the
// bytes the client has not read (see above); slack, how many of them may
// be the window's rounding alone (a segment while the window is open, 0
// when it is shut); and whether the kernel tells (false: do not pace).
type peerWindow interface {
	unread() (unread, slack int, ok bool)
}

// pacer holds one stream's writer back while its client has more than
// limit bytes unread. Only the stream's writer goroutine uses it.
type pacer struct {
	pw    peerWindow
	limit int
	// timeout is how long a held client may show no reading.
	timeout time.Duration
	now     func() time.Time

	sinceCheck int // bytes written since the last look at the window
	held       bool
	behind     bool      // its last hold lasted longer than quickRelease
	last       int       // unread at the last look while held
	heldAt     time.Time // when the hold began
	moved      time.Time // when the client was last seen reading (or the hold began)
	probed     time.Time // the last probe
	backoff    uint      // the next probe waits paceProbe << backoff
	// stillWait is how long a held client's window must not move before
	// it is written to within the window's rounding (0: stillFor).
	stillWait time.Duration
}

// newPacer returns the pacer of a connection, or nil when it cannot be
// paced (limit ≤ 0, not TCP, no peer window from the kernel).
func newPacer(tc *net.TCPConn, limit int, timeout time.Duration) *pacer {
	if limit <= 0 || tc == nil {
		return nil
	}
	pw := tcpPeerWindow(tc)
	if pw == nil {
		return nil
	}
	if _, _, ok := pw.unread(); !ok {
		return nil
	}
	return &pacer{pw: pw, limit: limit, timeout: staleFactor * timeout, now: time.Now}
}

// paceAction is what a held writer does next.
type paceAction int

const (
	paceWrite    paceAction = iota // not held: take and write
	paceWait                       // held: wait for the next tick
	paceProbeNow                   // held: send a probe, then wait
	paceCut                        // held, and the client read nothing for the timeout
)

// wrote accounts n bytes written to the connection.
func (p *pacer) wrote(n int) { p.sinceCheck += n }

// next says whether the writer may write now. It looks at the window when
// the writer is held or the client behind, or once limit/2 bytes were
// written since it last looked.
func (p *pacer) next() paceAction {
	if !p.held && !p.behind && p.sinceCheck < p.limit/2 {
		return paceWrite
	}
	p.sinceCheck = 0
	unread, slack, ok := p.pw.unread()
	now := p.now()
	limit := p.limit
	if p.behind {
		limit = p.limit / 4
	}
	if p.held && unread < p.last { // the client read some (probes only add)
		p.moved, p.backoff = now, 0
	}
	// A held client whose window has not moved for a while is let go as
	// well while its window's rounding could hide that it read everything.
	wait := max(p.stillWait, stillFor)
	still := p.held && unread <= p.limit+slack && now.Sub(p.moved) >= wait
	if !ok || unread <= limit || still {
		if p.held {
			p.behind = ok && now.Sub(p.heldAt) > quickRelease
		}
		if still && unread > limit {
			p.stillWait = min(2*wait, p.timeout/2)
		} else {
			p.stillWait = 0
		}
		p.held = false
		return paceWrite
	}
	if !p.held {
		// The hold begins. The window may be stale (a client that read
		// its buffer after the last acknowledgement announced nothing):
		// probe at once, so that one that keeps up is held only for as
		// long as its acknowledgement takes.
		p.held, p.heldAt, p.moved, p.last, p.probed, p.backoff = true, now, now, unread, now, 0
		return paceProbeNow
	}
	p.last = unread
	switch {
	case now.Sub(p.moved) >= p.timeout:
		return paceCut
	case now.Sub(p.probed) >= paceProbe<<p.backoff:
		// Each probe takes room in the client's receive buffer (a
		// segment's overhead, not its two bytes): while the window
		// stays shut they are sent less and less often.
		p.probed = now
		p.backoff = min(p.backoff+1, maxProbeBackoff)
		return paceProbeNow
	}
	return paceWait
}
