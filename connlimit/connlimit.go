// Package connlimit caps the connections an HTTP listener holds open, below
// the process's file-descriptor limit, and refuses the ones past the cap at
// once with a plain HTTP 503 instead of letting them queue or starve the
// process of descriptors: a process out of descriptors can no longer answer
// /livez, open a data file or accept a NATS client.
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

// refusal is what a connection past the cap reads before it is closed.
const refusal = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: application/json\r\n" +
	"Retry-After: 1\r\n" +
	"Connection: close\r\n" +
	"Content-Length: 33\r\n\r\n" +
	`{"error":"too_many_connections"}` + "\n"

// refuseTimeout bounds the write of the refusal: the socket is new, its
// buffer empty, so the write does not block unless something is very wrong.
const refuseTimeout = 100 * time.Millisecond

// Listener is a net.Listener holding at most Max connections open. Accept
// answers a connection past the cap with an HTTP 503 ("too_many_connections",
// Retry-After: 1), closes it, counts it, and waits for the next one.
type Listener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused atomic.Uint64
	// OnRefuse, when set before the first Accept, is called for every
	// refused connection (a metric's Inc).
	OnRefuse func()
}

// New caps ln at max open connections (max ≥ 1).
func New(ln net.Listener, max int) *Listener {
	return &Listener{Listener: ln, max: int64(max)}
}

// Max returns the cap.
func (l *Listener) Max() int { return int(l.max) }

// Open returns the number of connections open now.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Refused returns how many connections were refused so far.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Accept returns the next connection within the cap.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &conn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refused.Add(1)
		if l.OnRefuse != nil {
			l.OnRefuse()
		}
		_ = c.SetWriteDeadline(time.Now().Add(refuseTimeout))
		_, _ = c.Write([]byte(refusal))
		_ = c.Close()
	}
}

// conn gives its slot back on the first Close.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
