package connlimit

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
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
	// get sends one request on c and reads the status line.
	get := func(c net.Conn) string {
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
		if got := get(c); got != "200 OK ok" {
			t.Fatalf("within the cap: %s", got)
		}
		idle = append(idle, c) // kept alive, idle
	}
	if got := get(dial()); got != `503 Service Unavailable {"error":"too_many_connections"}` {
		t.Fatalf("past the cap: %q", got)
	}
	if ln.Refused() != 1 || refused != 1 || ln.Open() != 3 {
		t.Fatalf("refused %d (hook %d), open %d; want 1, 1, 3", ln.Refused(), refused, ln.Open())
	}
	idle[0].Close()
	waitOpen(t, ln, 2)
	if got := get(dial()); got != "200 OK ok" {
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
