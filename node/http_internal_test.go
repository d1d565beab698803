package node

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeHTTPWaitsForHandlers: serveHTTP returns only after every
// request has returned, whether it stops on its context (a request past
// the drain bound has its connection closed) or because serving failed
// (the listener went away under it): the node stops the bridge's
// publisher next, which no request may still be using.
func TestServeHTTPWaitsForHandlers(t *testing.T) {
	for _, tt := range []struct {
		name string
		stop func(cancel context.CancelFunc, ln net.Listener)
	}{
		{"context ends", func(cancel context.CancelFunc, _ net.Listener) { cancel() }},
		{"serving fails", func(_ context.CancelFunc, ln net.Listener) { _ = ln.Close() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			entered, release := make(chan struct{}), make(chan struct{})
			var finished atomic.Bool
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(entered)
				// A request that outlives the bound: it ends after its
				// connection is closed, or once released.
				select {
				case <-r.Context().Done():
				case <-release:
				}
				<-release // its own wind-down (a publisher's acks)
				finished.Store(true)
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- serveHTTP(ctx, ln, h, 50*time.Millisecond, slog.New(slog.DiscardHandler), func(*http.Server) {})
			}()
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			go func() {
				if res, err := client.Get("http://" + ln.Addr().String() + "/"); err == nil {
					res.Body.Close()
				}
			}()
			<-entered
			tt.stop(cancel, ln)
			// Released well after the drain bound has passed.
			timer := time.AfterFunc(2*time.Second, func() { close(release) })
			defer timer.Stop()
			select {
			case <-done:
				if !finished.Load() {
					t.Fatal("serveHTTP returned while a request was still running")
				}
			case <-time.After(20 * time.Second):
				t.Fatal("serveHTTP did not return")
			}
		})
	}
}
