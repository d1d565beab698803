// Package inflight counts an HTTP server's requests in flight, so that the
// code that stops the server returns only after each has:
// http.Server.Close closes connections without waiting for their handlers.
package inflight

import (
	"net/http"
	"sync"
)

// Requests tracks the requests of the handlers Track wraps. A request that
// starts after Wait began (its connection read before the close) is
// answered by Deny instead, untracked work being what Wait rules out. The
// zero value is ready to use once Deny is set.
type Requests struct {
	// Deny answers a request that came too late.
	Deny func(http.ResponseWriter)

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Track returns h, counted.
func (q *Requests) Track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			q.Deny(w)
			return
		}
		q.wg.Add(1)
		q.mu.Unlock()
		defer q.wg.Done()
		h.ServeHTTP(w, r)
	})
}

// Wait refuses new requests and waits for those in flight.
func (q *Requests) Wait() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wg.Wait()
}
