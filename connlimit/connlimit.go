// Package connlimit caps the connections an HTTP listener holds open, below
// the process's file-descriptor limit, and refuses the ones past the cap at
// once with a plain HTTP 503 instead of letting them queue or starve the
// process of descriptors: a process out of descriptors can no longer answer
// /livez, open a data file or accept a NATS client.
//
// A listener may also cap the connections of one source (CapPerSource):
// idle connections carry no token, so no per-tenant cap can apply to them,
// and without a per-source cap one client holding the node's cap refuses
// every other client's new connections. A source is the peer's IPv4
// address, or the /64 prefix of its IPv6 address (one host's usual
// allocation, in which it may pick any address). Connections whose peer is
// not an IP address (Unix sockets, or a wrapped listener's own address
// type) have no source: only the node-wide cap applies to them.
//
// It does not time connections out; that is the http.Server's job
// (ReadHeaderTimeout, IdleTimeout), which every Threadcast listener sets.
//
// # Concurrency contract
//
// A Listener is safe for concurrent use, as a net.Listener must be; its
// connections may be closed from any goroutine, any number of times.
package connlimit

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Reserve is the number of file descriptors a cap leaves to everything else
// the process opens: NATS connections, JetStream's data files, logs.
const Reserve = 1024

// DefaultMax is the cap used when none is configured, at most: the
// automatic cap is the smaller of it and half of what Reserve leaves.
const DefaultMax = 16384

// ErrTooMany is returned by Check when a cap does not fit the process's
// file-descriptor limit.
var ErrTooMany = errors.New("connlimit: connection cap does not fit the file descriptor limit")

// FDLimit returns the process's soft limit on open files (RLIMIT_NOFILE;
// the Go runtime raises it to the hard limit at start).
func FDLimit() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, fmt.Errorf("connlimit: getrlimit: %w", err)
	}
	return r.Cur, nil
}

// Check returns the cap to use for max, given the file-descriptor limit
// fds: max itself when max + Reserve fits in fds, an ErrTooMany naming the
// numbers otherwise; for max == 0 the automatic cap, min(DefaultMax,
// (fds-Reserve)/2), or ErrTooMany when fds leaves no room at all.
func Check(max int, fds uint64) (int, error) {
	if max < 0 {
		return 0, fmt.Errorf("%w: a negative cap (%d)", ErrTooMany, max)
	}
	if fds <= Reserve+1 {
		return 0, fmt.Errorf("%w: the limit of %d open files leaves nothing after the %d kept for the rest of the process; raise it (ulimit -n)", ErrTooMany, fds, Reserve)
	}
	if max == 0 {
		return int(min(DefaultMax, (fds-Reserve)/2)), nil
	}
	if uint64(max)+Reserve > fds {
		return 0, fmt.Errorf("%w: %d connections and the %d descriptors kept for the rest of the process exceed the limit of %d open files; lower the cap or raise the limit (ulimit -n)",
			ErrTooMany, max, Reserve, fds)
	}
	return max, nil
}

// AutoPerSource, as a per-source cap, asks CheckPerSource for the default:
// a quarter of the node-wide cap.
const AutoPerSource = -1

// CheckPerSource returns the per-source cap to use for perSource, given the
// node-wide cap nodeMax (as Check returned it): 0 (no per-source cap) and 1
// to nodeMax as they are, AutoPerSource a quarter of nodeMax (at least 1), any other
// value an error. A quarter leaves three quarters of the node to every
// other source however many connections one source opens, and still lets
// one address (a NAT gateway, a load generator) hold thousands at the
// default node cap.
func CheckPerSource(perSource, nodeMax int) (int, error) {
	switch {
	case perSource == AutoPerSource:
		return max(1, nodeMax/4), nil
	case perSource < 0:
		return 0, fmt.Errorf("connlimit: a negative per-source cap (%d); 0 is none, %d a quarter of the node's", perSource, AutoPerSource)
	case perSource > nodeMax:
		return 0, fmt.Errorf("connlimit: a per-source cap of %d exceeds the node's cap of %d", perSource, nodeMax)
	}
	return perSource, nil
}

// Reason says which cap refused a connection.
type Reason int

const (
	// ByNode: the listener held its Max connections.
	ByNode Reason = iota
	// BySource: the connection's source held its PerSource connections.
	BySource
)

// String is the reason's metric label: "node" or "source".
func (r Reason) String() string {
	if r == BySource {
		return "source"
	}
	return "node"
}

// refusal is what a connection past the cap reads before it is closed.
const refusal = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: application/json\r\n" +
	"Retry-After: 1\r\n" +
	"Connection: close\r\n" +
	"Content-Length: 33\r\n\r\n" +
	`{"error":"too_many_connections"}` + "\n"

// refusalBytes is refusal, converted once: a conversion per refusal would
// allocate for every connection of a flood.
var refusalBytes = []byte(refusal)

// refuseTimeout bounds the write of the refusal: the socket is new, its
// buffer empty, so the write does not block unless something is very wrong.
const refuseTimeout = 100 * time.Millisecond

// Listener is a net.Listener holding at most Max connections open, and at
// most PerSource of one source when that cap is set. Accept answers a
// connection past either cap with the same HTTP 503
// ("too_many_connections", Retry-After: 1), closes it, counts it by
// Reason, and waits for the next one.
type Listener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused [2]atomic.Uint64 // by Reason
	// OnRefuse, when set before the first Accept, is called for every
	// connection refused by the node-wide cap (a metric's Inc);
	// OnRefuseSource for every one refused by the per-source cap. Both are
	// called on the accepting goroutine and must not block.
	OnRefuse       func()
	OnRefuseSource func()

	// perSource is the per-source cap (0: none); mu guards sources, the
	// open connections of each source that has any (an entry is deleted
	// when its last connection closes, so the table's size is bounded by
	// the connections open).
	perSource int
	mu        sync.Mutex
	sources   map[netip.Addr]int
}

// New caps ln at max open connections (max ≥ 1).
func New(ln net.Listener, max int) *Listener {
	return &Listener{Listener: ln, max: int64(max)}
}

// CapPerSource caps the connections open from one source at n (0: no
// per-source cap; 1 ≤ n ≤ Max, see CheckPerSource) and returns l. It must
// be called before the first Accept.
func (l *Listener) CapPerSource(n int) *Listener {
	l.perSource = n
	if n > 0 {
		l.sources = make(map[netip.Addr]int)
	}
	return l
}

// Max returns the cap.
func (l *Listener) Max() int { return int(l.max) }

// PerSource returns the per-source cap (0: none).
func (l *Listener) PerSource() int { return l.perSource }

// Open returns the number of connections open now.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Sources returns the number of sources with connections open now (0
// without a per-source cap).
func (l *Listener) Sources() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sources)
}

// Refused returns how many connections were refused so far, by either cap.
func (l *Listener) Refused() uint64 { return l.refused[ByNode].Load() + l.refused[BySource].Load() }

// RefusedBy returns how many connections the cap named by r refused so far.
func (l *Listener) RefusedBy(r Reason) uint64 { return l.refused[r].Load() }

// Accept returns the next connection within the caps.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src, ok := l.takeSource(c)
		if !ok {
			l.refuse(c, BySource, l.OnRefuseSource)
			continue
		}
		if l.open.Add(1) <= l.max {
			return &conn{Conn: c, l: l, src: src}, nil
		}
		l.open.Add(-1)
		l.releaseSource(src)
		l.refuse(c, ByNode, l.OnRefuse)
	}
}

// refuse counts c as refused for r and answers it the refusal.
func (l *Listener) refuse(c net.Conn, r Reason, hook func()) {
	l.refused[r].Add(1)
	if hook != nil {
		hook()
	}
	_ = c.SetWriteDeadline(time.Now().Add(refuseTimeout))
	_, _ = c.Write(refusalBytes)
	_ = c.Close()
}

// takeSource counts c against its source's cap: the source (invalid when
// there is no per-source cap or c's peer has no source), and false when
// the source holds its cap already.
func (l *Listener) takeSource(c net.Conn) (netip.Addr, bool) {
	if l.perSource <= 0 {
		return netip.Addr{}, true
	}
	src := Source(c.RemoteAddr())
	if !src.IsValid() {
		return src, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sources[src] >= l.perSource {
		return netip.Addr{}, false
	}
	l.sources[src]++
	return src, true
}

// releaseSource gives back a connection taken by takeSource.
func (l *Listener) releaseSource(src netip.Addr) {
	if !src.IsValid() {
		return
	}
	l.mu.Lock()
	if l.sources[src]--; l.sources[src] <= 0 {
		delete(l.sources, src)
	}
	l.mu.Unlock()
}

// Source returns the source a connection from addr counts against: its
// IPv4 address (an IPv4-mapped IPv6 address as IPv4), or its IPv6
// address's /64 prefix (the address with the low 64 bits zeroed, the zone
// dropped); the zero Addr when addr is not a TCP or UDP address.
func Source(addr net.Addr) netip.Addr {
	var ap netip.AddrPort
	switch a := addr.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		return netip.Addr{}
	}
	ip := ap.Addr().Unmap()
	if !ip.IsValid() || ip.Is4() {
		return ip
	}
	p, err := ip.WithZone("").Prefix(64)
	if err != nil {
		return netip.Addr{}
	}
	return p.Addr()
}

// conn gives its slots back on the first Close.
type conn struct {
	net.Conn
	l    *Listener
	src  netip.Addr // invalid: not counted against a source
	once sync.Once
}

// NetConn returns the connection it wraps (as tls.Conn.NetConn does), for
// socket options such as the send buffer.
func (c *conn) NetConn() net.Conn { return c.Conn }

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.releaseSource(c.src)
	})
	return err
}
