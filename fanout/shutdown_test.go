package fanout

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// failingListener hands out its first connection, then fails every later
// Accept once fail is closed: http.Server.Serve returns that error while the
// first connection's request is still being handled.
type failingListener struct {
	net.Listener
	fail     chan struct{}
	accepted int
}

var errListenerBroken = errors.New("listener broken")

func (l *failingListener) Accept() (net.Conn, error) {
	if l.accepted > 0 {
		<-l.fail
		return nil, errListenerBroken
	}
	l.accepted++
	return l.Listener.Accept()
}

// TestServeListenerFailsWhileHandling: when the listener fails while a
// request is in progress and that request outlasts the shutdown bound,
// Serve closes the server's connections (so the handler's context ends) and
// returns the listener's error only after the handler has returned.
func TestServeListenerFailsWhileHandling(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	cfg := DefaultConfig()
	cfg.AuthKey = testKey
	srv, err := New(nc, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &failingListener{Listener: tcp, fail: make(chan struct{})}
	defer tcp.Close()

	entered := make(chan struct{})
	var handlerDone sync.WaitGroup
	handlerDone.Add(1)
	var returned sync.Mutex // held until the handler returns
	returned.Lock()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer handlerDone.Done()
		defer returned.Unlock()
		close(entered)
		<-r.Context().Done() // only a closed connection ends it
	})
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(context.Background(), ln, h, 200*time.Millisecond) }()

	client := &http.Client{Timeout: 20 * time.Second}
	go func() {
		if resp, err := client.Get("http://" + tcp.Addr().String() + "/hang"); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the handler")
	}
	close(ln.fail)

	select {
	case err := <-serveErr:
		if !errors.Is(err, errListenerBroken) {
			t.Errorf("Serve: %v, want the listener's error", err)
		}
		if !returned.TryLock() {
			t.Error("Serve returned while a handler was still running")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the listener failed and the shutdown bound passed")
	}
	handlerDone.Wait()
}
