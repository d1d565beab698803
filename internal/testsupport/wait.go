package testsupport

import (
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// PollInterval is how often WaitFor and WaitForErr test their condition.
const PollInterval = 5 * time.Millisecond

// WaitFor polls cond every PollInterval until it holds, and fails t when it
// still does not hold after timeout, saying what was awaited.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(PollInterval) // the polling interval, not a synchronisation
	}
}

// WaitForErr polls cond every PollInterval until it returns nil, and fails t
// with cond's last error when it still does not after timeout.
func WaitForErr(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(PollInterval) // the polling interval, not a synchronisation
	}
}

// LeakTimeout is how long the goroutine checks give goroutines to exit.
const LeakTimeout = 10 * time.Second

// Goroutines is a goroutine count taken before a test starts what it must
// stop again.
type Goroutines int

// CountGoroutines returns the number of goroutines running now.
func CountGoroutines() Goroutines { return Goroutines(runtime.NumGoroutine()) }

// Exited waits up to LeakTimeout until no more goroutines run than base
// (nats.go's and net/http's end asynchronously), and fails t otherwise with
// the stacks of all of them.
func (base Goroutines) Exited(t testing.TB) {
	t.Helper()
	if n, ok := base.settle(LeakTimeout); !ok {
		t.Fatalf("goroutine leak: %d running, baseline %d\n%s", n, base, stacks())
	}
}

// settle waits up to timeout for the count to fall to base; it returns the
// last count and whether it did. It first closes the idle keep-alive
// connections of http.DefaultClient: their goroutines are the test's
// client's, which would otherwise keep them until the server closes them.
func (base Goroutines) settle(timeout time.Duration) (int, bool) {
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		n := runtime.NumGoroutine()
		if n <= int(base) {
			return n, true
		}
		if time.Now().After(deadline) {
			return n, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// NoLeaks takes a baseline now and checks it, as Exited does, once t's
// cleanups registered after it have run. Call it before anything that
// registers a cleanup, so that its check runs last.
func NoLeaks(t testing.TB) {
	t.Helper()
	base := CountGoroutines()
	t.Cleanup(func() {
		if n, ok := base.settle(LeakTimeout); !ok {
			t.Errorf("goroutine leak: %d running, baseline %d\n%s", n, base, stacks())
		}
	})
}

// stacks returns the stacks of all goroutines, cut to 20,000 bytes.
func stacks() string {
	buf := make([]byte, 1<<20)
	s := strings.TrimSpace(string(buf[:runtime.Stack(buf, true)]))
	if len(s) > 20000 {
		return s[:20000] + "\n…"
	}
	return s
}
