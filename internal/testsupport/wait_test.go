package testsupport

import (
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitFor(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			time.Sleep(time.Millisecond)
			n.Add(1)
		}
	}()
	if out := run(t, func(tb testing.TB) {
		WaitFor(tb, 5*time.Second, "three", func() bool { return n.Load() == 3 })
	}); out.how != "" {
		t.Fatalf("WaitFor of a condition that comes true: %+v", out)
	}
	start := time.Now()
	out := run(t, func(tb testing.TB) {
		WaitFor(tb, 50*time.Millisecond, "never", func() bool { return false })
	})
	if out.how != "fatal" || out.msg != "timed out after 50ms waiting for never" {
		t.Fatalf("WaitFor of a false condition: %+v", out)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("WaitFor gave up after %v, before its timeout", d)
	}
}

func TestWaitForErr(t *testing.T) {
	calls := 0
	if out := run(t, func(tb testing.TB) {
		WaitForErr(tb, 5*time.Second, "the third call", func() error {
			if calls++; calls < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	}); out.how != "" || calls != 3 {
		t.Fatalf("WaitForErr of a condition that comes true: %+v after %d calls", out, calls)
	}
	out := run(t, func(tb testing.TB) {
		WaitForErr(tb, 20*time.Millisecond, "never", func() error { return errors.New("still broken") })
	})
	if out.how != "fatal" || out.msg != "timed out after 20ms waiting for never: still broken" {
		t.Fatalf("WaitForErr of a failing condition: %+v", out)
	}
}

// quiet waits until the goroutines of earlier tests (an HTTP client's
// connections, say) have exited: until the count holds for 100ms.
func quiet(t *testing.T) {
	t.Helper()
	prev := runtime.NumGoroutine()
	WaitFor(t, 10*time.Second, "a steady goroutine count", func() bool {
		time.Sleep(100 * time.Millisecond)
		n := runtime.NumGoroutine()
		steady := n == prev
		prev = n
		return steady
	})
}

// A goroutine that outlives its baseline is a leak until it exits.
func TestGoroutines(t *testing.T) {
	quiet(t)
	base := CountGoroutines()
	stop := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		<-stop
	}()
	if n, ok := base.settle(50 * time.Millisecond); ok || n <= int(base) {
		t.Fatalf("a goroutine still running: settle = %d, %v (baseline %d)", n, ok, base)
	}
	close(stop)
	<-exited
	base.Exited(t)
}

// NoLeaks checks in a cleanup, after the cleanups registered after it.
func TestNoLeaks(t *testing.T) {
	stop := make(chan struct{})
	out := run(t, func(tb testing.TB) {
		NoLeaks(tb)
		go func() { <-stop }()
		tb.Cleanup(func() { close(stop) })
	})
	if out.how != "" {
		t.Fatalf("NoLeaks with the goroutine stopped by a later cleanup: %+v", out)
	}
	if testing.Short() {
		return // the failing case waits for LeakTimeout
	}
	quiet(t)
	stop2 := make(chan struct{})
	defer close(stop2)
	out = run(t, func(tb testing.TB) {
		NoLeaks(tb)
		go func() { <-stop2 }()
	})
	if out.how != "error" || !strings.HasPrefix(out.msg, "goroutine leak: ") || !strings.Contains(out.msg, "TestNoLeaks") {
		t.Fatalf("NoLeaks with a goroutine left running: %.300q", out.msg)
	}
}
