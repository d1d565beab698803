package pipeline

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/internal/testsupport"
	"github.com/threadcast/threadcast/internal/testsupport/natstest"
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
	return natstest.Connect(tb, s.ClientURL(), nats.MaxReconnects(-1))
}

// waitFor is testsupport.WaitForErr of a condition that says in its error
// what it waits for.
func waitFor(tb testing.TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	testsupport.WaitForErr(tb, timeout, "the condition", cond)
}

// checkNoGoroutineLeak is testsupport.NoLeaks: register it first so it
// runs last.
func checkNoGoroutineLeak(tb testing.TB) {
	tb.Helper()
	testsupport.NoLeaks(tb)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
