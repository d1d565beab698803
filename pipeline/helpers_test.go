package pipeline

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/threadcast/threadcast/natsembed"
)

// runServer starts an embedded JetStream server on a random port with a
// temporary store, stopped by t.Cleanup.
func runServer(tb testing.TB) *server.Server {
	tb.Helper()
	return runServerAt(tb, tb.TempDir())
}

func runServerAt(tb testing.TB, dir string) *server.Server {
	tb.Helper()
	cfg := natsembed.DefaultConfig()
	cfg.StoreDir = dir
	s, err := natsembed.Start(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// connect opens a client connection closed by t.Cleanup.
func connect(tb testing.TB, s *server.Server) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// waitFor polls cond every few milliseconds until it returns nil or the
// timeout passes, then fails with cond's last error.
func waitFor(tb testing.TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v: %v", timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkNoGoroutineLeak fails tb if, after its cleanups ran, more goroutines
// run than at the baseline taken when it was called (nats.go's
// test/helper_test.go approach). Register it first so it runs last.
func checkNoGoroutineLeak(tb testing.TB) {
	tb.Helper()
	base := runtime.NumGoroutine()
	tb.Cleanup(func() {
		var n int
		deadline := time.Now().Add(10 * time.Second)
		for {
			n = runtime.NumGoroutine()
			if n <= base || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n > base {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			tb.Errorf("goroutine leak: %d running, baseline %d\n%s", n, base, trimStacks(string(buf)))
		}
	})
}

func trimStacks(s string) string {
	if len(s) > 20000 {
		return s[:20000] + "\n…"
	}
	return strings.TrimSpace(s)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
