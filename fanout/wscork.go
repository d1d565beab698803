package fanout

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/bytebufferpool"
)

// corkMax is the most a corked connection gathers before it
// writes through: a batch larger than this goes out in writes of about
// this size, and a message larger than it (a snapshot) unbuffered.
const corkMax = 64 << 10

// wsBufSize is the WebSocket library's write buffer on a hijacked
// connection: it flushes a message in writes of this size, and at its
// end. wsDirectMax is the largest message it surely writes in one: the
// buffer less the longest header of a server's (unmasked) frame, 10 bytes
// (RFC 6455 §5.2).
const (
	wsBufSize   = 4 << 10
	wsDirectMax = wsBufSize - 10
)

// corkConn is the socket under a WebSocket stream, and under an SSE
// stream that took its connection over (sseSink.takeOver). The WebSocket
// library flushes after every message; between cork and uncork what it
// (or the SSE sink) writes is gathered and then written at once, so a
// batch of queued messages costs the socket one write. Outside a batch
// (pings, pongs, the close frame, the SSE head at the join), and for a
// batch of one message written in one piece (batch), writes go straight
// through.
//
// Every write to the socket has a deadline, moved while the client accepts
// bytes (writeLocked), so a client that accepts no bytes for the write
// timeout ends its stream whatever the library's own contexts say, and one
// that reads slowly does not. mu serialises writes to
// the socket and is held across them: a pong written by the library's
// reader goroutine must not land inside a batch being written.
type corkConn struct {
	net.Conn
	timeout time.Duration

	mu       sync.Mutex
	buf      *bytebufferpool.ByteBuffer // non-nil while corked
	deadline time.Time                  // the socket's write deadline

	written atomic.Int64 // bytes the socket took: whether the client reads (wsSink.ping)
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf != nil {
		if c.buf.Len()+len(p) <= corkMax {
			return c.buf.Write(p)
		}
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) < corkMax {
			return c.buf.Write(p)
		}
	}
	return c.writeLocked(p)
}

// cork starts gathering writes.
func (c *corkConn) cork() {
	c.mu.Lock()
	if c.buf == nil {
		c.buf = bytebufferpool.Get()
	}
	c.mu.Unlock()
}

// batch writes items corked, each with put (which writes to c): the
// batch costs the socket one write (more past corkMax). A batch of one
// item of at most direct bytes, which put writes in one Write, is not
// corked: it would cost the same one write, and a buffer from the pool
// and a copy besides (most batches at a light load are one item). It
// returns the bytes of the items put.
func (c *corkConn) batch(items []item, put func(b []byte) error, direct int) (int, error) {
	if len(items) == 1 && len(items[0].b) <= direct {
		if err := put(items[0].b); err != nil {
			return 0, err
		}
		return len(items[0].b), nil
	}
	c.cork()
	n := 0
	for i := range items {
		if err := put(items[i].b); err != nil {
			_ = c.uncork()
			return n, err
		}
		n += len(items[i].b)
	}
	return n, c.uncork()
}

// uncork writes what was gathered and stops gathering; an idle stream
// holds no buffer.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return nil
	}
	var err error
	if c.buf.Len() > 0 {
		_, err = c.writeLocked(c.buf.B)
	}
	// Put, not Reset then Put: the pool sizes the buffers it keeps by the
	// lengths it is given back, and would take an emptied one for a
	// batch of nothing and drop every buffer larger than its smallest.
	bytebufferpool.Put(c.buf)
	c.buf = nil
	return err
}

func (c *corkConn) flushLocked() error {
	if c.buf.Len() == 0 {
		return nil
	}
	_, err := c.writeLocked(c.buf.B)
	c.buf.Reset()
	return err
}

// writeLocked writes p to the socket. A write that reaches its deadline
// having written some of p goes on with a new one: the client is reading,
// slowly. Only a deadline reached with nothing written ends it.
func (c *corkConn) writeLocked(p []byte) (int, error) {
	n := 0
	for {
		if now := time.Now(); c.deadline.Sub(now) < c.timeout-c.timeout/8 {
			c.deadline = now.Add(c.timeout)
			_ = c.Conn.SetWriteDeadline(c.deadline)
		}
		m, err := c.Conn.Write(p[n:])
		n += m
		c.written.Add(int64(m))
		if err == nil || m == 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
	}
}

// corkWriter hands the WebSocket library a corkConn when it hijacks the
// connection.
type corkWriter struct {
	http.ResponseWriter
	cc *corkConn
}

func (w corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil { // nothing is buffered after a hijack; to be sure
		conn.Close()
		return nil, nil, err
	}
	w.cc.Conn = conn
	return w.cc, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(w.cc, wsBufSize)), nil
}

func (w corkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
