package pipeline

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// stallProxy forwards TCP connections to a NATS server. While stalled it
// forwards nothing either way but keeps every connection open: the client
// stays connected and its requests go unanswered — a network partition as
// the client sees it, not a closed connection (which fails requests at
// once). It is closed, and its goroutines waited for, by the test's
// cleanup.
type stallProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	closed  bool
	conns   []net.Conn
	wg      sync.WaitGroup
}

// newStallProxy forwards to url (nats://host:port).
func newStallProxy(t *testing.T, url string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: strings.TrimPrefix(url, "nats://")}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the proxy's client URL.
func (p *stallProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.copy(out, in)
		go p.copy(in, out)
	}
}

// copy forwards src to dst, holding each read while stalled.
func (p *stallProxy) copy(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.stalled && !p.closed {
			p.cond.Wait()
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			return
		}
	}
}

func (p *stallProxy) stall(on bool) {
	p.mu.Lock()
	p.stalled = on
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *stallProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
