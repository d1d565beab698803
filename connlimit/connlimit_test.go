package connlimit

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		max     int
		fds     uint64
		want    int
		wantErr bool
	}{
		{0, 1 << 20, DefaultMax, false},
		{0, 4096, (4096 - Reserve) / 2, false},
		{100, 4096, 100, false},
		{4096 - Reserve, 4096, 4096 - Reserve, false},
		{4096 - Reserve + 1, 4096, 0, true},
		{0, Reserve, 0, true},
		{-1, 1 << 20, 0, true},
	}
	for _, tt := range tests {
		got, err := Check(tt.max, tt.fds)
		if got != tt.want || (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrTooMany)) {
			t.Errorf("Check(%d, %d) = %d, %v; want %d, error %v", tt.max, tt.fds, got, err, tt.want, tt.wantErr)
		}
	}
	if n, err := FDLimit(); err != nil || n == 0 {
		t.Errorf("FDLimit() = %d, %v", n, err)
	}
}

// TestListenerCapsAndRefuses runs an http.Server on a capped listener over
// real TCP: idle keep-alive connections fill the cap, the next connection
// reads a 503 at once, a slot freed by a closed connection is reused, and
// the server's IdleTimeout frees slots by itself.
func TestListenerCapsAndRefuses(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := New(raw, 3)
	refused := 0
	ln.OnRefuse = func() { refused++ }
	hs := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ReadHeaderTimeout: time.Second,
		IdleTimeout:       300 * time.Millisecond,
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	t.Cleanup(func() {
		_ = hs.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})
	addr := raw.Addr().String()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var idle []net.Conn
	for range 3 {
		c := dial()
		if got := get(t, c); got != "200 OK ok" {
			t.Fatalf("within the cap: %s", got)
		}
		idle = append(idle, c) // kept alive, idle
	}
	if got := get(t, dial()); got != `503 Service Unavailable {"error":"too_many_connections"}` {
		t.Fatalf("past the cap: %q", got)
	}
	if ln.Refused() != 1 || refused != 1 || ln.Open() != 3 {
		t.Fatalf("refused %d (hook %d), open %d; want 1, 1, 3", ln.Refused(), refused, ln.Open())
	}
	idle[0].Close()
	waitOpen(t, ln, 2)
	if got := get(t, dial()); got != "200 OK ok" {
		t.Fatalf("after a slot was freed: %s", got)
	}
	// IdleTimeout closes the idle keep-alive connections: the cap empties.
	waitOpen(t, ln, 0)
}

func waitOpen(t *testing.T, ln *Listener, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ln.Open() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want %d", ln.Open(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCheckPerSource(t *testing.T) {
	tests := []struct {
		perSource, max int
		want           int
		wantErr        bool
	}{
		{0, 100, 0, false},
		{AutoPerSource, 16384, 4096, false},
		{AutoPerSource, 3, 1, false},
		{25, 100, 25, false},
		{100, 100, 100, false},
		{101, 100, 0, true},
		{-2, 100, 0, true},
	}
	for _, tt := range tests {
		got, err := CheckPerSource(tt.perSource, tt.max)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("CheckPerSource(%d, %d) = %d, %v; want %d, error %v", tt.perSource, tt.max, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSource(t *testing.T) {
	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	tests := []struct {
		addr net.Addr
		want string // "" : no source
	}{
		{tcp("192.0.2.7:443"), "192.0.2.7"},
		{tcp("[::ffff:192.0.2.7]:443"), "192.0.2.7"},
		{tcp("[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443"), "2001:db8:1:2::"},
		{tcp("[2001:db8:1:2::1]:80"), "2001:db8:1:2::"},
		{tcp("[2001:db8:1:3::1]:80"), "2001:db8:1:3::"},
		{tcp("[fe80::1%eth0]:80"), "fe80::"},
		{&net.UDPAddr{IP: net.ParseIP("198.51.100.1"), Port: 1}, "198.51.100.1"},
		{&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}, ""},
		{&net.TCPAddr{}, ""},
	}
	for _, tt := range tests {
		got := Source(tt.addr)
		if (tt.want == "" && got.IsValid()) || (tt.want != "" && got.String() != tt.want) {
			t.Errorf("Source(%v) = %v, want %q", tt.addr, got, tt.want)
		}
	}
}

// TestListenerCapsPerSource runs an http.Server on a listener capped per
// source over real TCP, dialled from two loopback addresses: one source's
// idle connections at its cap refuse its next one with the node cap's 503,
// counted as a source refusal, while the other source still connects; the
// table empties as the connections close.
func TestListenerCapsPerSource(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := New(raw, 10).CapPerSource(2)
	var bySource, byNode atomic.Int32
	ln.OnRefuseSource = func() { bySource.Add(1) }
	ln.OnRefuse = func() { byNode.Add(1) }
	hs := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       time.Minute,
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	t.Cleanup(func() {
		_ = hs.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	})
	addr := raw.Addr().String()
	dialFrom := func(src string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var held []net.Conn
	for range 2 {
		c := dialFrom("127.0.0.1")
		if got := get(t, c); got != "200 OK ok" {
			t.Fatalf("within the source's cap: %s", got)
		}
		held = append(held, c)
	}
	if got := get(t, dialFrom("127.0.0.1")); got != `503 Service Unavailable {"error":"too_many_connections"}` {
		t.Fatalf("past the source's cap: %q", got)
	}
	for range 2 {
		c := dialFrom("127.0.0.2")
		if got := get(t, c); got != "200 OK ok" {
			t.Fatalf("another source, while the first is at its cap: %s", got)
		}
		held = append(held, c)
	}
	if ln.RefusedBy(BySource) != 1 || ln.RefusedBy(ByNode) != 0 || bySource.Load() != 1 || byNode.Load() != 0 || ln.Refused() != 1 {
		t.Fatalf("refused by source %d (hook %d), by node %d (hook %d); want 1, 1, 0, 0",
			ln.RefusedBy(BySource), bySource.Load(), ln.RefusedBy(ByNode), byNode.Load())
	}
	if ln.Open() != 4 || ln.Sources() != 2 {
		t.Fatalf("%d open from %d sources, want 4 from 2", ln.Open(), ln.Sources())
	}
	held[0].Close()
	waitOpen(t, ln, 3)
	if got := get(t, dialFrom("127.0.0.1")); got != "200 OK ok" {
		t.Fatalf("after a slot of the source was freed: %s", got)
	}
	for _, c := range held {
		c.Close()
	}
	_ = hs.Close() // closes the connections it holds
	waitOpen(t, ln, 0)
	if n := ln.Sources(); n != 0 {
		t.Fatalf("%d sources left in the table with no connection open", n)
	}
}

// TestListenerPerSourceConcurrent accepts connections dialled at once from
// four loopback sources, each closed a moment after it is accepted: no
// source ever holds more than its cap, the per-source cap refuses, and the table
// and the count empty when every connection is closed (run with -race).
func TestListenerPerSourceConcurrent(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const perSource, sources, dialers = 3, 4, 8
	ln := New(raw, 10).CapPerSource(perSource)
	var mu sync.Mutex
	live, peak := map[netip.Addr]int{}, 0
	var conns sync.WaitGroup
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			src := Source(c.RemoteAddr())
			mu.Lock()
			live[src]++
			peak = max(peak, live[src])
			mu.Unlock()
			conns.Add(1)
			go func() {
				defer conns.Done()
				time.Sleep(time.Millisecond)
				mu.Lock()
				live[src]--
				mu.Unlock()
				c.Close()
				c.Close() // twice: the slot is given back once
			}()
		}
	}()
	var wg sync.WaitGroup
	for s := range sources {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+s))}
		for range dialers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := net.Dialer{LocalAddr: local}
				for range 25 {
					c, err := d.Dial("tcp", raw.Addr().String())
					if err != nil {
						t.Error(err)
						return
					}
					_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
					_, _ = io.Copy(io.Discard, c) // until the server closes it
					c.Close()
				}
			}()
		}
	}
	wg.Wait()
	raw.Close()
	<-accepted
	conns.Wait()
	if peak > perSource {
		t.Errorf("a source held %d connections at once, over its cap of %d", peak, perSource)
	}
	if ln.RefusedBy(BySource) == 0 {
		t.Errorf("no connection refused by the per-source cap (%d by the node's)", ln.RefusedBy(ByNode))
	}
	if ln.Open() != 0 || ln.Sources() != 0 {
		t.Errorf("%d open, %d sources in the table after every connection closed; want 0, 0", ln.Open(), ln.Sources())
	}
}

// TestListenerPerSourceUnix: a Unix socket's peers have no source, so only
// the node-wide cap applies to them.
func TestListenerPerSourceUnix(t *testing.T) {
	raw, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ln := New(raw, 2).CapPerSource(1)
	for i := range 2 {
		c, err := net.Dial("unix", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		if ln.Open() != i+1 || ln.Sources() != 0 {
			t.Fatalf("%d open, %d sources; want %d, 0", ln.Open(), ln.Sources(), i+1)
		}
	}
}

// get sends one request on c and reads the status line and body.
func get(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "write: " + err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "read: " + err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	resp.Body.Close()
	return resp.Status + " " + strings.TrimSpace(string(body))
}

// nopConn is a net.Conn whose writes and closes do nothing: the refusal's
// own cost, without the kernel's.
type nopConn struct{ net.Conn }

func (nopConn) Write(p []byte) (int, error)      { return len(p), nil }
func (nopConn) Close() error                     { return nil }
func (nopConn) SetWriteDeadline(time.Time) error { return nil }
func (nopConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 1} }

// BenchmarkRefuse is the listener's own work for one connection refused.
func BenchmarkRefuse(b *testing.B) {
	l := New(nil, 1)
	b.ReportAllocs()
	for b.Loop() {
		l.refuse(nopConn{}, BySource, nil)
	}
}
